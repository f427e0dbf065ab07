//! Candidate code on the cluster: the export stage as a sandboxed Ray task.
//!
//! The sandbox is the local one ([`Sandbox::parts`]): its policy is computed here with
//! placeholders for the node's paths and markers for the node's facts, and shipped with the
//! step; `python/jb/ray_sandbox.py` expands it on the node and runs a fresh worker inside
//! bubblewrap (the candidate file and the project arrive by content, the export's files come
//! back into the step's folder), so the step's output, its files and every key are those of a
//! local export. A node without a working bubblewrap answers `no_sandbox`: the step then runs
//! in this machine's sandbox, with a warning and `ray.sandbox_fallback` in its result; candidate
//! code never runs unsandboxed on a node.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::{lock, node_info, worker_output, RayExecutor};
use crate::exec::route;
use crate::exec::sandbox::{self, Part, Sandbox, Trust, DEVICE_PREFIXES, PASSED_ENV, SECRET_WORDS};
use crate::exec::{Executor, StepOutput, StepRequest};

/// Where the node's project tree, Python environment and scratch folder go in the policy.
const ROOT: &str = "/@jb-root@";
const PYENV: &str = "/@jb-pyenv@";
const SCRATCH: &str = "/@jb-scratch@";

/// The sandbox policy as a node expands it (`jb.ray_sandbox.expand`): the bubblewrap arguments
/// of [`Sandbox::parts`] for a project tree that has no cache in it, with the limits that go
/// around it locally (the scratch quota; PDEATHSIG and no core dumps, as
/// `crate::exec::child::die_with_jb`).
pub fn node_policy(env: &[(String, String)]) -> Value {
    let sb = Sandbox {
        bwrap: PathBuf::from("bwrap"),
        project_root: PathBuf::from(ROOT),
        python_dir: PathBuf::from(format!("{ROOT}/python")),
        pyenv: PathBuf::from(PYENV),
        // A node's tree holds no cache: nothing to hide.
        cache_dir: PathBuf::new(),
    };
    let argv: Vec<Value> = sb
        .parts(Path::new(SCRATCH), Path::new(ROOT), env)
        .into_iter()
        .map(|p| match p {
            Part::Arg(s) => json!(s.to_string_lossy()),
            Part::Size(n) => json!({ "size": n }),
            Part::Devices => json!({ "devices": DEVICE_PREFIXES }),
            Part::BasePrefix => json!({"base_prefix": true}),
            Part::PassedEnv => {
                json!({ "passed_env_names": PASSED_ENV, "secret_words": SECRET_WORDS })
            }
        })
        .collect();
    json!({
        "argv": argv,
        "placeholders": {"root": ROOT, "pyenv": PYENV, "scratch": SCRATCH},
        "scratch_bytes": sandbox::scratch_limit(),
        "rlimits": {"RLIMIT_CORE": 0},
        "pdeathsig": libc::SIGKILL,
        "seccomp": seccomp_policy(),
    })
}

/// The local sandbox's seccomp filter (`crate::exec::seccomp`), compiled here and shipped as
/// the bytes bubblewrap's `--seccomp` reads, for the node to load when it has this machine's
/// architecture (`jb.ray_sandbox.seccomp_fd`).
fn seccomp_policy() -> Value {
    match crate::exec::seccomp::program() {
        Ok(p) => {
            let hex: String = crate::exec::seccomp::bytes(&p)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            json!({"arch": std::env::consts::ARCH, "filter_hex": hex})
        }
        Err(e) => json!({"error": e.to_string()}),
    }
}

/// What the kernel enforced around a step in a node's sandbox, in the shape of the local
/// [`sandbox::Jail::json`]: the user namespace always (bwrap cannot start without it), the
/// sized tmpfs and the seccomp filter as the node reports; memory, process count and the
/// scratch folder's size are polled by the node (its cgroups are not jb's to configure).
fn node_limits(r: &Value, memory_mb: Option<u64>) -> Value {
    let sb = r.get("sandbox").cloned().unwrap_or(json!({}));
    let mut enforced = vec!["user_namespace"];
    let mut missing = serde_json::Map::new();
    let polled = "on a Ray node: polled by the node's task (jb does not configure its cgroups), not enforced by the kernel";
    for name in ["cgroup_memory", "cgroup_pids", "sized_scratch"] {
        missing.insert(name.into(), json!(polled));
    }
    if sb.get("sized_tmpfs").and_then(Value::as_bool) == Some(true) {
        enforced.push("sized_tmpfs");
    } else {
        missing.insert(
            "sized_tmpfs".into(),
            json!("the node's bubblewrap has no --size"),
        );
    }
    if sb.get("seccomp").and_then(Value::as_bool) == Some(true) {
        enforced.push("seccomp");
    } else {
        let why = sb
            .get("no_seccomp")
            .and_then(Value::as_str)
            .unwrap_or("the node did not say it loaded the filter");
        missing.insert("seccomp".into(), json!(why));
    }
    json!({
        "enforced": enforced,
        "not_enforced": missing,
        "memory_mb": memory_mb,
        "hit": [],
        "where": "ray_node",
    })
}

impl RayExecutor {
    /// `--no-sandbox`: candidate code runs unprotected, and then only on this machine.
    fn no_sandbox(&self) -> bool {
        self.untrusted
            .as_ref()
            .and_then(|d| d.python.as_ref())
            .and_then(|p| p.untrusted.as_ref())
            .is_some_and(|u| u.no_sandbox)
    }

    /// An `export` step: in jb's sandbox on a node, or in this machine's (see the module).
    pub(super) fn run_export(&self, req: &StepRequest) -> StepOutput {
        let Some(local) = &self.untrusted else {
            return StepOutput::infra(
                "error",
                "candidate steps need the local sandboxed executor (internal: none configured)",
            );
        };
        if self.no_sandbox() {
            return local.execute(req);
        }
        let args = match crate::exec::request::worker_args(req, None) {
            Ok(a) => a,
            Err(o) => return o,
        };
        let memory_mb = req
            .memory_mb
            .or_else(|| local.python.as_ref().and_then(|p| p.default_memory_mb));
        let timeout = req
            .timeout
            .unwrap_or_else(crate::settings::default_step_timeout);
        // The node's files land in a staging folder; only the declared products (the export
        // index and the programs it names, capped) go on into the step's folder, as locally
        // (`crate::exec::products`), so the step's files and every later key are a local run's.
        let staging = match sandbox::scratch_dir(&req.project.cache_dir) {
            Ok(d) => d,
            Err(e) => {
                return StepOutput::infra(
                    "error",
                    format!("cannot create a folder for the node's files: {e}"),
                )
            }
        };
        let request = json!({
            "op": req.step.kind.as_str(),
            "args": Value::Object(args),
            "sandbox": node_policy(&self.spec.env),
            "timeout_s": timeout.as_secs_f64(),
            "memory_mb": memory_mb,
            "project_root": req.project.root,
            "python_dir": self.spec.python_dir,
            "out_dir": staging.path(),
        });
        let driver = match self.driver() {
            Ok(d) => d,
            Err(e) => return self.failure(e),
        };
        let r = match driver.request("sandboxed", request, Self::wait_limit(req), &req.cancel) {
            Ok(r) => r,
            Err(e) => return self.failure(e),
        };
        if let Some(why) = r.get("no_sandbox").and_then(Value::as_str) {
            return self.export_here(req, why, &r);
        }
        let taken = crate::exec::products::collect_export(staging.path(), &req.out_dir);
        let mut r = r;
        if let Value::Object(m) = &mut r {
            m.insert("files".into(), json!(taken.kept));
        }
        let mut out = match r.get("forged").and_then(Value::as_str) {
            // Candidate code wrote an answer of its own on the protocol pipe (as locally).
            Some(why) => StepOutput::new(
                "rejected",
                json!({"reasons": [format!("forged worker answer: {why}")],
                       "stderr_tail": r.get("stderr_tail"), "claimed": r.get("claimed")}),
            ),
            None => worker_output(req.step.kind.as_str(), &r, &req.out_dir),
        };
        if let Value::Object(m) = &mut out.result {
            let mut node = node_info(&r);
            if let (Value::Object(n), Some(s)) = (&mut node, r.pointer("/sandbox/bwrap")) {
                n.insert("sandbox".into(), s.clone());
            }
            m.insert("ray".into(), node);
            m.insert("kernel_limits".into(), node_limits(&r, memory_mb));
            if let Value::Object(acc) = taken.json() {
                m.extend(acc);
            }
        }
        route::settle_export(out, Some(Trust::Sandboxed))
    }

    /// The node that got the step cannot sandbox it: this machine's sandbox runs it instead.
    fn export_here(&self, req: &StepRequest, why: &str, r: &Value) -> StepOutput {
        let node = node_info(r);
        let id = node["node_id"].as_str().unwrap_or("?").to_string();
        if lock(&self.unsandboxed_nodes).insert(id.clone()) {
            eprintln!(
                "warning: Ray node {id} ({}) has no working sandbox ({why}); candidate code sent there runs in this machine's sandbox instead",
                node["node_ip"].as_str().unwrap_or("?")
            );
        }
        let Some(local) = &self.untrusted else {
            return StepOutput::infra("error", "no local sandboxed executor");
        };
        let mut out = local.execute(req);
        if let Value::Object(m) = &mut out.result {
            // `ray` is bookkeeping (not part of the output digest): keys stay those of a local run.
            m.insert(
                "ray".into(),
                json!({"sandbox_fallback": format!("node {id} cannot sandbox: {why}; ran in this machine's sandbox"),
                       "refused_by": node}),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_policy_is_the_local_sandbox_with_node_markers() {
        let p = node_policy(&[("JAX_PLATFORMS".into(), "cpu".into())]);
        let argv = p["argv"].as_array().unwrap();
        let strs: Vec<&str> = argv.iter().filter_map(Value::as_str).collect();
        let has = |seq: &[&str]| strs.windows(seq.len()).any(|w| w == seq);
        assert!(has(&["--ro-bind", ROOT, ROOT]), "{strs:?}");
        assert!(has(&["--ro-bind", PYENV, PYENV]), "{strs:?}");
        assert!(has(&["--bind", SCRATCH, SCRATCH]), "{strs:?}");
        assert!(has(&["--unshare-net"]) && has(&["--die-with-parent"]) && has(&["--clearenv"]));
        assert!(has(&["--setenv", "JB_SANDBOXED", "1"]));
        assert!(has(&["--setenv", "JAX_PLATFORMS", "cpu"]));
        assert!(has(&["--setenv", "PYTHONPATH", &format!("{ROOT}/python")]));
        // No host path of this machine leaks into the policy (the node has its own).
        assert!(!strs.iter().any(|s| s.contains("/tmp/jb-")), "{strs:?}");
        let markers: Vec<&Value> = argv.iter().filter(|v| v.is_object()).collect();
        assert!(markers.contains(&&json!({"size": sandbox::TMP_BYTES})));
        assert!(markers.contains(&&json!({"base_prefix": true})));
        assert!(markers.iter().any(|m| m.get("devices").is_some()));
        assert!(markers.iter().any(|m| m.get("passed_env_names").is_some()));
        assert_eq!(p["scratch_bytes"], json!(sandbox::scratch_limit()));
        // The local seccomp filter travels as the bytes bwrap reads: whole instructions, the
        // very program the local jail loads.
        let hex = p["seccomp"]["filter_hex"].as_str().unwrap();
        let local = crate::exec::seccomp::bytes(&crate::exec::seccomp::program().unwrap());
        assert_eq!(hex.len(), local.len() * 2);
        assert_eq!(hex.len() % 16, 0);
        assert_eq!(p["seccomp"]["arch"], std::env::consts::ARCH);
    }

    #[test]
    fn a_node_limit_not_reported_is_listed_as_not_enforced() {
        let got = node_limits(&json!({"sandbox": {"bwrap": "/usr/bin/bwrap"}}), Some(512));
        assert_eq!(got["enforced"], json!(["user_namespace"]));
        for name in [
            "cgroup_memory",
            "cgroup_pids",
            "sized_scratch",
            "sized_tmpfs",
            "seccomp",
        ] {
            assert!(got["not_enforced"][name].is_string(), "{name}: {got}");
        }
        let got = node_limits(
            &json!({"sandbox": {"sized_tmpfs": true, "seccomp": true}}),
            None,
        );
        assert_eq!(
            got["enforced"],
            json!(["user_namespace", "sized_tmpfs", "seccomp"])
        );
    }
}
