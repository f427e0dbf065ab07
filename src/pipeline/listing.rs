//! `jb list pipelines|steps`: one row per pipeline or per step instance of an expanded set.

use std::path::PathBuf;

use serde::Serialize;

use super::PipelineSet;

/// One pipeline, as `jb list pipelines --json` prints it (field order is the output's).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PipelineRow {
    pub name: String,
    /// The file, relative to the project root (`<generator>` for a generated pipeline).
    pub file: PathBuf,
    /// Whether `jb build all` includes it.
    pub default: bool,
    /// Step definitions.
    pub steps: usize,
    /// Step instances once expanded.
    pub instances: usize,
    pub description: Option<String>,
}

/// One step instance, as `jb list steps --json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepRow {
    pub id: String,
    pub kind: &'static str,
    /// How many steps it depends on.
    pub deps: usize,
    /// Its input files, relative to the project root.
    pub inputs: Vec<String>,
}

impl PipelineSet {
    pub fn pipeline_rows(&self) -> Vec<PipelineRow> {
        self.pipelines
            .iter()
            .map(|p| PipelineRow {
                name: p.name.clone(),
                file: p.path.clone(),
                default: p.file.default,
                steps: p.file.steps.len(),
                instances: self.steps.iter().filter(|s| s.pipeline == p.name).count(),
                description: p.file.description.clone(),
            })
            .collect()
    }

    pub fn step_rows(&self) -> Vec<StepRow> {
        self.steps
            .iter()
            .map(|s| StepRow {
                id: s.id.clone(),
                kind: s.kind.as_str(),
                deps: s.deps.len(),
                inputs: s.inputs.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_keys_in_order() {
        let p = PipelineRow {
            name: "p".into(),
            file: "pipelines/p.yaml".into(),
            default: true,
            steps: 2,
            instances: 5,
            description: None,
        };
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            r#"{"name":"p","file":"pipelines/p.yaml","default":true,"steps":2,"instances":5,"description":null}"#
        );
        let s = StepRow {
            id: "p/a[x=1]".into(),
            kind: "command",
            deps: 1,
            inputs: vec!["in.txt".into()],
        };
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"id":"p/a[x=1]","kind":"command","deps":1,"inputs":["in.txt"]}"#
        );
    }
}
