//! The step-outcome vocabulary: what became of a step (its status and the outcome class it
//! stands for), the trust level of a result, and an upstream step's result as a dependant sees
//! it.
//!
//! A neutral, lower-level module: the executors (`exec`) produce these values, the engine
//! stores them and the reports (`report`) and the agent read them, without any of those
//! importing another for the vocabulary. `report` does not import `exec` at all.

pub mod dep;
pub mod status;
pub mod trust;

pub use dep::DepResult;
pub use status::{OutcomeClass, StepStatus, UnknownStatus};
pub use trust::Trust;

#[cfg(test)]
mod layering {
    //! The module layering this split exists for, checked on the source: `report` reads the
    //! outcome vocabulary from here and never imports `exec`; `outcome` imports neither.
    use std::path::Path;

    fn sources_mentioning(dir: &str, needle: &str) -> Vec<String> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(dir);
        let mut hits = Vec::new();
        for entry in std::fs::read_dir(&root).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                if text.contains(needle) {
                    hits.push(path.display().to_string());
                }
            }
        }
        hits
    }

    #[test]
    fn report_does_not_import_exec() {
        let needle = format!("crate::{}", "exec");
        assert_eq!(sources_mentioning("report", &needle), Vec::<String>::new());
    }

    #[test]
    fn outcome_imports_neither_exec_nor_report() {
        for module in ["exec", "report", "engine"] {
            let needle = format!("crate::{module}");
            assert_eq!(sources_mentioning("outcome", &needle), Vec::<String>::new());
        }
    }
}
