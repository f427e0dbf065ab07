//! What `jb doctor --json` prints: the environment fingerprint, the device's measured peaks, the
//! paths and whether the OS sandbox starts here; with `--executor ray`, the cluster instead.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;

use crate::exec::sandbox::Sandbox;
use crate::project::Project;

/// `jb doctor --json` on this machine (field order is the output's).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DoctorReport {
    pub fingerprint: BTreeMap<String, String>,
    /// The worker's `peak` answer (null when it did not answer).
    pub peak: Value,
    pub pyenv: PathBuf,
    /// Which pins the environment was built from.
    pub pins: PinsReport,
    pub cache_dir: PathBuf,
    pub sandbox: SandboxReport,
}

/// The environment's pin set: its id, interpreter, requirements file and whether these are the
/// fallback (Python 3.11, jax 0.10.2) pins.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PinsReport {
    pub id: String,
    pub python: String,
    pub requirements: String,
    pub fallback: bool,
}

impl PinsReport {
    /// The pins of the environment at `project.pyenv_dir` for `variant` (None: not set up).
    pub fn of(project: &Project, variant: &'static str) -> Option<PinsReport> {
        let id = crate::pyenv::ready(&project.pyenv_dir, &project.python_dir, variant).ok()??;
        let (_, version) = crate::pyenv::pins::parse_id(&id)?;
        let set = crate::pyenv::PinSet::new(&project.python_dir, variant, version);
        Some(PinsReport {
            requirements: project.rel(&set.file),
            fallback: set.is_fallback(),
            python: version.dotted(),
            id,
        })
    }
}

/// Whether the OS sandbox starts: `{ok: true, bwrap, startup_ms}` or `{ok: false, error}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SandboxReport {
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bwrap: Option<PathBuf>,
    /// Start-up time of a trivial command inside it, milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the kernel enforces around a sandboxed step here (`enforced`, `not_enforced` with
    /// why, the default memory cap and pids limit): the `kernel_limits` a step's result carries,
    /// from a jail set up and torn down as a step's is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<Value>,
}

impl SandboxReport {
    /// Start the project's sandbox with a trivial command inside it, and time it.
    pub fn probe(project: &Project) -> SandboxReport {
        let sb = Sandbox::new(
            &project.root,
            &project.python_dir,
            &project.pyenv_dir,
            &project.cache_dir,
        );
        match sb.and_then(|sb| sb.probe().map(|t| (sb, t))) {
            Ok((sb, t)) => SandboxReport {
                ok: true,
                limits: Some(kernel_limits(&sb, &project.cache_dir)),
                bwrap: Some(sb.bwrap),
                startup_ms: Some(t.as_secs_f64() * 1e3),
                error: None,
            },
            Err(e) => SandboxReport {
                ok: false,
                bwrap: None,
                startup_ms: None,
                error: Some(e.to_string()),
                limits: None,
            },
        }
    }
}

/// The limits a step's jail gets here, from one set up (cgroup, sized scratch mount, seccomp
/// filter) on a fresh scratch folder and dropped.
fn kernel_limits(sb: &Sandbox, cache_dir: &std::path::Path) -> Value {
    match crate::exec::sandbox::scratch_dir(cache_dir) {
        Ok(scratch) => {
            let jail = crate::exec::sandbox::Jail::start(sb, scratch.path(), None);
            let mut v = jail.json();
            if let Value::Object(m) = &mut v {
                m.remove("hit");
            }
            v
        }
        Err(e) => serde_json::json!({"error": format!("no scratch folder to try them on: {e}")}),
    }
}

/// `jb doctor --executor ray --json` (field order is the output's).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RayDoctorReport {
    /// Always `ray`.
    pub executor: &'static str,
    pub address: String,
    /// The cluster's answer to `nodes` (nodes, totals, the judges' resource).
    pub cluster: Value,
    pub fingerprint: BTreeMap<String, String>,
    pub pyenv: PathBuf,
    pub cache_dir: PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_keys_in_order() {
        let ok = SandboxReport {
            ok: true,
            bwrap: Some("/usr/bin/bwrap".into()),
            startup_ms: Some(1.5),
            error: None,
            limits: None,
        };
        let r = DoctorReport {
            fingerprint: BTreeMap::from([("jax".to_string(), "0.4".to_string())]),
            peak: json!({"flops": 1.0}),
            pyenv: "/p".into(),
            pins: PinsReport {
                id: "cpu-py313-0".into(),
                python: "3.13".into(),
                requirements: "python/requirements-cpu.txt".into(),
                fallback: false,
            },
            cache_dir: "/c".into(),
            sandbox: ok,
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"fingerprint":{"jax":"0.4"},"peak":{"flops":1.0},"pyenv":"/p","pins":{"id":"cpu-py313-0","python":"3.13","requirements":"python/requirements-cpu.txt","fallback":false},"cache_dir":"/c","sandbox":{"ok":true,"bwrap":"/usr/bin/bwrap","startup_ms":1.5}}"#
        );
        let failed = SandboxReport {
            ok: false,
            bwrap: None,
            startup_ms: None,
            error: Some("no bwrap".into()),
            limits: None,
        };
        assert_eq!(
            serde_json::to_string(&failed).unwrap(),
            r#"{"ok":false,"error":"no bwrap"}"#
        );
        let ray = RayDoctorReport {
            executor: "ray",
            address: "auto".into(),
            cluster: json!({"nodes": []}),
            fingerprint: BTreeMap::new(),
            pyenv: "/p".into(),
            cache_dir: "/c".into(),
        };
        assert_eq!(
            serde_json::to_string(&ray).unwrap(),
            r#"{"executor":"ray","address":"auto","cluster":{"nodes":[]},"fingerprint":{},"pyenv":"/p","cache_dir":"/c"}"#
        );
    }
}
