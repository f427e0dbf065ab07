//! Where a Python step runs: a pooled trusted worker, the pooled judge on an exported program,
//! or a fresh worker that imports the candidate (inside the OS sandbox).
//!
//! A candidate's compile/verify/profile step that `needs` an `export` step is judged on the
//! exported program when that export succeeded: its impl becomes `{kind: exported, path: DIR}`
//! (DIR: the export's files materialized read-only from the CAS) and a pooled worker, which
//! never imports candidate code, runs it. Otherwise (not exportable, or no export upstream) the
//! candidate's own code runs, in a fresh sandboxed worker.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::sandbox::Trust;
use super::{DepResult, StepOutput};
use crate::cache::Cas;
use crate::pipeline::{Step, StepKind};

/// The folder of the export's files inside an export step's out_dir.
pub const EXPORT_DIR: &str = "export";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// A trusted implementation (XLA reference, library baseline): a pooled worker.
    Pooled,
    /// The candidate's own code: a fresh worker, sandboxed.
    Candidate,
    /// The exported program of the upstream `export` step (file name -> digest): the pooled judge.
    Artifact {
        export_step: String,
        files: BTreeMap<String, String>,
    },
}

/// Decide where `step` runs, given its direct upstream results.
pub fn route(step: &Step, deps: &[DepResult]) -> Route {
    if !step.untrusted() {
        return Route::Pooled;
    }
    if step.kind == StepKind::Export {
        return Route::Candidate;
    }
    let Some(export) = deps.iter().find(|d| d.kind == StepKind::Export.as_str()) else {
        return Route::Candidate;
    };
    if export.status != "ok" {
        return Route::Candidate;
    }
    let files: BTreeMap<String, String> = export
        .result
        .get("files")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(k, _)| k.starts_with(&format!("{EXPORT_DIR}/")))
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    if !files.contains_key(&format!("{EXPORT_DIR}/index.json")) {
        return Route::Candidate;
    }
    Route::Artifact {
        export_step: export.step_id.clone(),
        files,
    }
}

/// Restore the export's files from the CAS into a fresh folder under `tmp` (`<cache>/tmp` locally;
/// outside the project for the Ray executor, which ships such a folder to a node by content),
/// read-only; returns the folder (remove it after the step) and the path of its export directory.
pub fn materialize_in(
    cache_dir: &Path,
    tmp: &Path,
    files: &BTreeMap<String, String>,
) -> Result<(tempfile::TempDir, PathBuf), String> {
    use std::os::unix::fs::PermissionsExt;
    let cas = Cas::open(cache_dir).map_err(|e| e.to_string())?;
    let _ = std::fs::create_dir_all(tmp);
    let dir = tempfile::Builder::new()
        .prefix("exported-")
        .tempdir_in(tmp)
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    for (name, digest) in files {
        if name.split('/').any(|c| c == ".." || c.is_empty()) {
            return Err(format!(
                "export file name {name:?} is not a plain relative path"
            ));
        }
        let dest = dir.path().join(name);
        cas.restore(digest, &dest)
            .map_err(|e| format!("export file {name}: {e}"))?;
        std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o444))
            .map_err(|e| format!("{}: {e}", dest.display()))?;
    }
    let export = dir.path().join(EXPORT_DIR);
    Ok((dir, export))
}

/// Ready a step to judge the export of `export_step`: its files restored under `tmp` (keep the
/// folder until the step is done) and the step's `impl` rewritten to `{kind: exported, path}`;
/// the rest of the spec (e.g. held-out `variants`) stays as the step gave it.
pub fn prepare_artifact(
    cache_dir: &Path,
    tmp: &Path,
    export_step: &str,
    files: &BTreeMap<String, String>,
    imp: Option<&Value>,
) -> Result<(tempfile::TempDir, Value), StepOutput> {
    let (dir, export) = materialize_in(cache_dir, tmp, files).map_err(|e| {
        StepOutput::infra(
            "error",
            format!("cannot materialize the export of {export_step}: {e}"),
        )
    })?;
    let mut spec = match imp {
        Some(Value::Object(m)) => m.clone(),
        _ => serde_json::Map::new(),
    };
    spec.insert("kind".into(), json!("exported"));
    spec.insert("path".into(), json!(export));
    Ok((dir, Value::Object(spec)))
}

/// Record on a judged result which export it judged, and jb's own account of its trust
/// (whatever the worker said is overwritten).
pub fn mark_artifact(out: &mut StepOutput, export_step: &str) {
    if let Value::Object(m) = &mut out.result {
        m.insert("exported_from".into(), json!(export_step));
        m.insert("trust".into(), json!(Trust::Artifact.as_str()));
    }
}

/// The last word on an export step's output, wherever it ran (its files already in
/// `out.files`): jb's own account of its trust, and an `ok` without a program is a forgery.
pub fn settle_export(mut out: StepOutput, trust: Option<Trust>) -> StepOutput {
    if out.status == "error"
        && out.result.pointer("/error/type").and_then(Value::as_str) == Some("UnknownOp")
    {
        // A worker from before the export op: the candidate is judged in the sandbox.
        out = StepOutput::infra(
            "not_exportable",
            "this worker has no `export` op (python/jb/ops/export.py); the candidate runs in the sandbox",
        );
    }
    if let (Some(t), Value::Object(m)) = (trust, &mut out.result) {
        // Whatever the worker said is overwritten.
        m.insert("trust".into(), json!(t.as_str()));
    }
    let index = format!("{EXPORT_DIR}/index.json");
    if out.status == "ok" && !out.files.contains_key(&index) {
        // The untrusted stage's word is not a program.
        let mut o = StepOutput::new(
            "rejected",
            json!({"reasons": [format!("the export stage answered ok but wrote no {index}")]}),
        );
        if let (Value::Object(m), Some(t)) = (&mut o.result, trust) {
            m.insert("trust".into(), json!(t.as_str()));
            m.insert("claimed".into(), out.result.clone());
        }
        return o;
    }
    out
}

pub use crate::outcome::trust::weakest;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn step(kind: &str, imp: Value) -> Step {
        Step {
            id: "p/s".into(),
            pipeline: "p".into(),
            name: "s".into(),
            kind: serde_json::from_value(json!(kind)).unwrap(),
            vars: Default::default(),
            params: json!({"workload": "workloads/w", "impl": imp}),
            inputs: vec![],
            outputs: vec![],
            run: None,
            deps: vec![],
            resources: Default::default(),
            timeout: None,
            memory_mb: None,
            cache: Default::default(),
            salt: None,
            default: false,
            at: crate::error::Location {
                file: "x".into(),
                line: 1,
                column: 1,
            },
        }
    }

    fn dep(kind: &str, status: &str, result: Value) -> DepResult {
        DepResult {
            step_id: format!("p/{kind}"),
            kind: kind.into(),
            vars: Default::default(),
            status: status.into(),
            result,
            key: "k".into(),
        }
    }

    #[test]
    fn routes() {
        let cand = json!({"kind": "candidate", "path": "c.py"});
        let xla = json!({"kind": "xla"});
        let files = json!({"files": {"export/index.json": "d1", "export/p0.bin": "d2", "stderr.txt": "d3"}});
        assert_eq!(route(&step("compile", xla), &[]), Route::Pooled);
        assert_eq!(route(&step("export", cand.clone()), &[]), Route::Candidate);
        assert_eq!(route(&step("verify", cand.clone()), &[]), Route::Candidate);
        let ok = dep("export", "ok", files.clone());
        match route(&step("verify", cand.clone()), &[ok]) {
            Route::Artifact { export_step, files } => {
                assert_eq!(export_step, "p/export");
                assert_eq!(files.len(), 2);
                assert_eq!(files["export/p0.bin"], "d2");
            }
            other => panic!("{other:?}"),
        }
        let not = dep("export", "not_exportable", files.clone());
        assert_eq!(
            route(&step("profile", cand.clone()), &[not]),
            Route::Candidate
        );
        let no_index = dep("export", "ok", json!({"files": {"export/p0.bin": "d2"}}));
        assert_eq!(route(&step("profile", cand), &[no_index]), Route::Candidate);
    }

    #[test]
    fn materialized_files_are_read_only() {
        use std::os::unix::fs::PermissionsExt;
        let cache = tempfile::tempdir().unwrap();
        let cas = Cas::open(cache.path()).unwrap();
        let d = cas.put_bytes(b"{\"programs\": []}").unwrap();
        let files = BTreeMap::from([("export/index.json".to_string(), d)]);
        let (dir, export) =
            materialize_in(cache.path(), &cache.path().join("tmp"), &files).unwrap();
        let f = export.join("index.json");
        assert_eq!(std::fs::read(&f).unwrap(), b"{\"programs\": []}");
        assert_eq!(f.metadata().unwrap().permissions().mode() & 0o222, 0);
        assert!(dir.path().starts_with(cache.path()));
        let bad = BTreeMap::from([("export/../x".to_string(), "00".to_string())]);
        assert!(materialize_in(cache.path(), &cache.path().join("tmp"), &bad).is_err());
    }
}
