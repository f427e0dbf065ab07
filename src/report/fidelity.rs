//! Fidelity notes: where a workload's reference knowingly differs from the published JAXBench
//! program (or from the KernelBench original it came from), its `workload.py` docstring says so in
//! a paragraph that starts with `Fidelity:`. The report lists those paragraphs, one note per
//! workload, so a reader of the numbers knows which function was measured.

use std::path::Path;

/// The `Fidelity:` paragraph of a workload file's module docstring, joined into one line.
pub fn paragraph(source: &str) -> Option<String> {
    let body = docstring(source)?;
    let mut lines = body
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("Fidelity:"));
    let first = lines.next()?.trim().trim_start_matches("Fidelity:").trim();
    let mut text = first.to_string();
    for l in lines.take_while(|l| !l.trim().is_empty()) {
        text.push(' ');
        text.push_str(l.trim());
    }
    let text = text.trim().to_string();
    (!text.is_empty()).then_some(text)
}

/// The module docstring: the first statement when it is a triple-quoted string.
fn docstring(source: &str) -> Option<&str> {
    let s = source.trim_start();
    for q in ["\"\"\"", "'''"] {
        if let Some(rest) = s.strip_prefix(q) {
            return rest.find(q).map(|end| &rest[..end]);
        }
    }
    None
}

/// One note per workload of `workloads` whose `workloads/<w>/workload.py` has a fidelity
/// paragraph: `fidelity, <w>: <paragraph>`.
pub fn notes(project_root: &Path, workloads: &[String]) -> Vec<String> {
    workloads
        .iter()
        .filter_map(|w| {
            let text =
                std::fs::read_to_string(project_root.join("workloads").join(w).join("workload.py"))
                    .ok()?;
            Some(format!("fidelity, {w}: {}", paragraph(&text)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paragraph_is_read_from_the_docstring_only() {
        let src = "\"\"\"Title.\n\nBody line.\n\nFidelity: kept jb's form\n  because of X.\n\nAfter.\n\"\"\"\n# Fidelity: not this\n";
        assert_eq!(
            paragraph(src).as_deref(),
            Some("kept jb's form because of X.")
        );
        assert_eq!(paragraph("\"\"\"Title.\"\"\"\n# Fidelity: outside\n"), None);
        assert_eq!(
            paragraph("import jax\n\"\"\"Fidelity: not a docstring\"\"\""),
            None
        );
        assert_eq!(
            paragraph("'''Fidelity: single quotes.'''"),
            Some("single quotes.".into())
        );
    }

    #[test]
    fn notes_name_the_workload_and_skip_those_without() {
        let dir = tempfile::tempdir().unwrap();
        for (w, doc) in [
            ("1p_A", "\"\"\"A.\n\nFidelity: differs.\n\"\"\""),
            ("2p_B", "\"\"\"B.\"\"\""),
        ] {
            std::fs::create_dir_all(dir.path().join("workloads").join(w)).unwrap();
            std::fs::write(
                dir.path().join("workloads").join(w).join("workload.py"),
                doc,
            )
            .unwrap();
        }
        let names = vec![
            "1p_A".to_string(),
            "2p_B".to_string(),
            "3p_missing".to_string(),
        ];
        assert_eq!(
            notes(dir.path(), &names),
            vec!["fidelity, 1p_A: differs.".to_string()]
        );
    }

    #[test]
    fn the_project_documents_its_divergences() {
        // The workloads whose published program is a listed exception or whose reference was
        // changed to match it (python/jb/tools/published_check.py, test_published_semantics.py).
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        for w in [
            "11p_Megablox_GMM",
            "26k_BMM_InstanceNorm_Sum_ResidualAdd_Multiply",
            "42k_Gemm_Max_Subtract_GELU",
        ] {
            let n = notes(root, &[w.to_string()]);
            assert_eq!(n.len(), 1, "{w} has no Fidelity: paragraph");
        }
    }
}
