//! The Ray executor (`--executor ray`): steps run on the nodes of a Ray cluster.
//!
//! jb keeps planning, keys, the cache and the run database; this executor only runs what the
//! engine decided must run, so a cache hit never touches the cluster. It starts one driver
//! process (`python -m jb.ray_driver`, jb's pinned environment with Ray) on first use and talks
//! line-delimited JSON to it, several requests in flight at once. Python worker steps and
//! `command` steps that hold a device run on judges (Ray actors, one per accelerator); other
//! `command` steps are Ray tasks; `grid`, `aggregate` and `translate` stay on this machine.
//! Results and their files come back here and are stored by the engine like local ones.

use crate::contract::ray as ray_protocol;
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::child::kill_group;
use super::dispatch::{Dispatch, Handler};
use super::python::{PythonExecutor, WorkerSpec};
use super::{CancelFlag, Executor, StepOutput, StepRequest};
use crate::pipeline::StepKind;

mod untrusted;

/// Where the cluster is and how jb uses it.
#[derive(Debug, Clone)]
pub struct RayConfig {
    /// `host:port` of the head's GCS, `auto`, or `ray://host:port`.
    pub address: String,
    /// The Ray resource that is one accelerator (`TPU`, `GPU`, or a custom `device`).
    pub device_resource: String,
    /// Judges per node on a cluster that has no `device_resource`.
    pub cpu_slots: u32,
    /// Tries of a step whose judge or node is lost.
    pub max_attempts: u32,
}

impl RayConfig {
    /// The default device resource for a backend.
    pub fn default_device_resource(backend: &str) -> &'static str {
        match backend {
            "tpu" => "TPU",
            "gpu" => "GPU",
            _ => "device",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RayError {
    /// The cluster could not be reached or joined (exit 3).
    #[error("{0}")]
    Unreachable(String),
    #[error("the Ray driver process died: {0}")]
    DriverDied(String),
    #[error("{0}")]
    Remote(String),
    #[error("interrupted")]
    Cancelled,
    #[error("no answer from the Ray driver within {0:.0} s")]
    Timeout(f64),
    /// A line from the driver outside the Ray protocol's contract (another version included).
    #[error(transparent)]
    Contract(#[from] crate::contract::ContractError),
}

type Pending = Arc<Mutex<HashMap<u64, Sender<Value>>>>;

/// The driver process and the requests in flight.
pub struct RayDriver {
    child: Mutex<Child>,
    stdin: Mutex<ChildStdin>,
    pending: Pending,
    next_id: AtomicU64,
    stderr_tail: Arc<Mutex<Vec<String>>>,
    pid: u32,
    /// The `ready` message: Ray version, cluster resources, node count.
    pub info: Value,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl RayDriver {
    pub fn start(spec: &WorkerSpec, cfg: &RayConfig) -> Result<RayDriver, RayError> {
        let env: serde_json::Map<String, Value> = spec
            .env
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        let mut cmd = Command::new(&spec.python);
        cmd.args(["-u", "-m", "jb.ray_driver", "--address", &cfg.address])
            .args(["--device-resource", &cfg.device_resource])
            .args(["--cpu-slots", &cfg.cpu_slots.to_string()])
            .args(["--max-attempts", &cfg.max_attempts.max(1).to_string()])
            .args(["--env", &Value::Object(env).to_string()])
            .current_dir(&spec.cwd)
            .env("PYTHONPATH", &spec.python_dir)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd.spawn().map_err(|e| {
            RayError::Unreachable(format!(
                "cannot start the Ray driver ({}): {e}",
                spec.python.display()
            ))
        })?;
        let pid = child.id();
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let tail = Arc::new(Mutex::new(Vec::new()));
        let tail2 = tail.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(l) = line else { break };
                let mut t = lock(&tail2);
                t.push(l);
                let excess = t.len().saturating_sub(40);
                t.drain(..excess);
            }
        });
        let pending: Pending = Arc::new(Mutex::new(HashMap::new()));
        let (ready_tx, ready_rx) = mpsc::channel::<Value>();
        let pending2 = pending.clone();
        std::thread::spawn(move || {
            let mut ready_tx = Some(ready_tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if v.get("event").is_some() {
                    if let Some(tx) = ready_tx.take() {
                        let _ = tx.send(v);
                    }
                    continue;
                }
                let Some(id) = v.get("id").and_then(Value::as_u64) else {
                    continue;
                };
                if let Some(tx) = lock(&pending2).remove(&id) {
                    let _ = tx.send(v);
                }
            }
            // The driver is gone: every request in flight gets a disconnected channel.
            lock(&pending2).clear();
        });
        let mut driver = RayDriver {
            child: Mutex::new(child),
            stdin: Mutex::new(stdin),
            pending,
            next_id: AtomicU64::new(1),
            stderr_tail: tail,
            pid,
            info: Value::Null,
        };
        // Connecting takes a few seconds; an unreachable address is reported by the driver.
        let first = ready_rx.recv_timeout(Duration::from_secs(180));
        match first.map(ray_protocol::Start::decode) {
            Ok(Ok(ray_protocol::Start::Ready(ready))) => {
                driver.info = serde_json::to_value(ready).expect("serializable");
                Ok(driver)
            }
            Ok(Ok(ray_protocol::Start::Failed(e))) => {
                driver.kill();
                Err(RayError::Unreachable(e.message))
            }
            Ok(Err(e)) => {
                driver.kill();
                Err(e.into())
            }
            Err(_) => {
                std::thread::sleep(Duration::from_millis(100));
                let tail = driver.stderr_tail();
                driver.kill();
                Err(RayError::Unreachable(format!(
                    "cannot connect to the Ray cluster at {}: the driver did not come up ({})",
                    cfg.address,
                    last_lines(&tail, 5)
                )))
            }
        }
    }

    pub fn stderr_tail(&self) -> String {
        lock(&self.stderr_tail).join("\n")
    }

    pub fn kill(&self) {
        kill_group(self.pid);
        let _ = lock(&self.child).wait();
    }

    /// Send one request and wait for its answer (the `result` object on success).
    pub fn request(
        &self,
        op: &str,
        args: Value,
        timeout: Option<Duration>,
        cancel: &CancelFlag,
    ) -> Result<Value, RayError> {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx): (Sender<Value>, Receiver<Value>) = mpsc::channel();
        lock(&self.pending).insert(id, tx);
        let line = ray_protocol::Request::new(id, op, args).line();
        {
            let mut stdin = lock(&self.stdin);
            if writeln!(stdin, "{line}")
                .and_then(|_| stdin.flush())
                .is_err()
            {
                lock(&self.pending).remove(&id);
                return Err(RayError::DriverDied(last_lines(&self.stderr_tail(), 5)));
            }
        }
        let start = Instant::now();
        loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(v) => {
                    return ray_protocol::Reply::decode(v)?
                        .into_result()
                        .map_err(RayError::Remote);
                }
                Err(RecvTimeoutError::Disconnected) => {
                    if cancel.is_cancelled() {
                        return Err(RayError::Cancelled); // the driver was stopped for Ctrl-C
                    }
                    std::thread::sleep(Duration::from_millis(100));
                    return Err(RayError::DriverDied(last_lines(&self.stderr_tail(), 5)));
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            if cancel.is_cancelled() {
                lock(&self.pending).remove(&id);
                return Err(RayError::Cancelled);
            }
            if let Some(t) = timeout {
                if start.elapsed() > t {
                    lock(&self.pending).remove(&id);
                    return Err(RayError::Timeout(t.as_secs_f64()));
                }
            }
        }
    }
}

impl Drop for RayDriver {
    fn drop(&mut self) {
        {
            let mut stdin = lock(&self.stdin);
            let shutdown = ray_protocol::Request::new(0, "shutdown", json!({}));
            let _ = writeln!(stdin, "{}", shutdown.line());
            let _ = stdin.flush();
        }
        let mut child = lock(&self.child);
        for _ in 0..100 {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        kill_group(self.pid);
        let _ = child.wait();
    }
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// Runs steps on a Ray cluster; `grid`, `aggregate` and `translate` run here.
pub struct RayExecutor {
    pub cfg: RayConfig,
    spec: WorkerSpec,
    driver: Mutex<Option<Arc<RayDriver>>>,
    /// Set when the cluster cannot be reached: the command then exits 3 with this message.
    fatal: Mutex<Option<String>>,
    /// The fingerprint the keys were computed with: a judge on a node whose environment
    /// differs answers nothing (its result would be served for the wrong machine).
    expect_fingerprint: Mutex<BTreeMap<String, String>>,
    /// Called when a node's fingerprint differs from the keys' (e.g. drop a cached fingerprint).
    pub on_mismatch: Option<Box<dyn Fn() + Send + Sync>>,
    /// Runs before the driver starts (e.g. install Ray into the environment on first use).
    pub before_start: Option<Box<dyn Fn() -> Result<(), String> + Send + Sync>>,
    /// `grid` and `aggregate` (built-ins) run here.
    local: Dispatch,
    /// `translate` steps (agent runs) run here too; the handler is replaced per engine.
    translate: Mutex<Option<Arc<Handler>>>,
    /// Candidate steps that are not the export (a candidate that could not be exported) run on
    /// this machine, in the OS sandbox; so does an export that no node can sandbox.
    untrusted: Option<Dispatch>,
    /// Nodes already reported as having no working sandbox (warned once each).
    unsandboxed_nodes: Mutex<std::collections::BTreeSet<String>>,
}

impl RayExecutor {
    pub fn new(cfg: RayConfig, spec: WorkerSpec) -> RayExecutor {
        RayExecutor {
            cfg,
            spec,
            driver: Mutex::new(None),
            fatal: Mutex::new(None),
            expect_fingerprint: Mutex::new(BTreeMap::new()),
            on_mismatch: None,
            before_start: None,
            local: Dispatch {
                python: None,
                translate: None,
            },
            translate: Mutex::new(None),
            untrusted: None,
            unsandboxed_nodes: Mutex::new(Default::default()),
        }
    }

    /// Where candidate steps run (the local, sandboxed executor).
    pub fn with_untrusted(mut self, python: PythonExecutor) -> Self {
        self.untrusted = Some(Dispatch {
            python: Some(python),
            translate: None,
        });
        self
    }

    /// Handle `translate` steps (agent runs) here, as the local executor does.
    pub fn set_translate(&self, translate: Option<Handler>) {
        *lock(&self.translate) = translate.map(Arc::new);
    }

    pub fn set_expected_fingerprint(&self, fp: &BTreeMap<String, String>) {
        *lock(&self.expect_fingerprint) = fp.clone();
    }

    /// The message of a failure to reach the cluster, if one happened.
    pub fn fatal(&self) -> Option<String> {
        lock(&self.fatal).clone()
    }

    /// The driver, started on first use.
    pub fn driver(&self) -> Result<Arc<RayDriver>, RayError> {
        let mut slot = lock(&self.driver);
        if let Some(d) = slot.as_ref() {
            return Ok(d.clone());
        }
        if let Some(f) = self.fatal() {
            return Err(RayError::Unreachable(f));
        }
        let started = match &self.before_start {
            Some(prepare) => prepare().map_err(RayError::Unreachable),
            None => Ok(()),
        }
        .and_then(|_| RayDriver::start(&self.spec, &self.cfg));
        match started {
            Ok(d) => {
                let d = Arc::new(d);
                *slot = Some(d.clone());
                Ok(d)
            }
            Err(e) => {
                *lock(&self.fatal) = Some(e.to_string());
                Err(e)
            }
        }
    }

    /// The environment fingerprint of a judge on the cluster (what keys of Python steps use).
    pub fn cluster_fingerprint(
        &self,
        project_root: &Path,
    ) -> Result<BTreeMap<String, String>, RayError> {
        let d = self.driver()?;
        let r = d.request(
            "fingerprint",
            json!({"project_root": project_root, "python_dir": self.spec.python_dir}),
            Some(Duration::from_secs(900)),
            &CancelFlag::default(),
        )?;
        let mut fp = BTreeMap::new();
        if let Some(Value::Object(m)) = r.get("fingerprint") {
            for (k, v) in m {
                fp.insert(
                    k.clone(),
                    v.as_str().map(str::to_string).unwrap_or(v.to_string()),
                );
            }
        }
        Ok(fp)
    }

    /// The cluster's nodes and resources (`jb doctor --executor ray`).
    pub fn nodes(&self) -> Result<Value, RayError> {
        self.driver()?.request(
            "nodes",
            json!({}),
            Some(Duration::from_secs(60)),
            &CancelFlag::default(),
        )
    }

    /// Generous: the node enforces the step's own timeout; this covers transfers and queueing.
    fn wait_limit(req: &StepRequest) -> Option<Duration> {
        req.timeout.map(|t| t * 3 + Duration::from_secs(600))
    }

    fn failure(&self, e: RayError) -> StepOutput {
        match e {
            RayError::Cancelled => StepOutput::infra("cancelled", "interrupted"),
            RayError::Timeout(_) => StepOutput::infra("timeout", e.to_string()),
            RayError::Unreachable(_) | RayError::Contract(_) => {
                StepOutput::infra("error", e.to_string())
            }
            RayError::DriverDied(_) => {
                // A later step starts a fresh driver.
                lock(&self.driver).take();
                StepOutput::infra("crashed", e.to_string())
            }
            RayError::Remote(m) => StepOutput::infra("error", format!("on the Ray cluster: {m}")),
        }
    }

    fn run_command(&self, req: &StepRequest) -> StepOutput {
        let Some(script) = req.step.run.as_deref() else {
            return StepOutput::new("failed", json!({"reasons": ["command step without `run`"]}));
        };
        let driver = match self.driver() {
            Ok(d) => d,
            Err(e) => return self.failure(e),
        };
        // The node sees the declared inputs and the files of the upstream command steps, at
        // their project paths (a command on a cluster is hermetic: nothing else travels).
        let mut inputs: Vec<String> = req.step.inputs.clone();
        for d in req.deps.iter().filter(|d| d.kind == "command") {
            if let Some(Value::Object(files)) = d.result.get("files") {
                inputs.extend(
                    files
                        .keys()
                        .filter(|f| req.project.root.join(f).is_file())
                        .cloned(),
                );
            }
        }
        inputs.sort();
        inputs.dedup();
        let args = json!({
            "project_root": req.project.root,
            "script": script,
            "inputs": inputs,
            "outputs": req.step.outputs,
            "resources": req.step.resources,
            "timeout_s": req.timeout.map(|t| t.as_secs_f64()),
            "env": {"JB_STEP": req.step.id, "JB_SCALE": req.scale, "JB_BACKEND": req.backend},
        });
        let r = match driver.request("command", args, Self::wait_limit(req), &req.cancel) {
            Ok(r) => r,
            Err(e) => return self.failure(e),
        };
        let node = node_info(&r);
        let duration_ms = r.get("duration_ms").cloned().unwrap_or(Value::Null);
        if r.get("timed_out").and_then(Value::as_bool) == Some(true) {
            return StepOutput::infra(
                "timeout",
                format!(
                    "command exceeded its {:?} timeout",
                    req.timeout.unwrap_or_default()
                ),
            );
        }
        let code = r.get("exit_code").and_then(Value::as_i64);
        if code != Some(0) {
            return StepOutput::new(
                "failed",
                json!({
                    "exit_code": code,
                    "reasons": [format!("command exited with exit status: {}", code.map(|c| c.to_string()).unwrap_or("signal".into()))],
                    "stderr_tail": r.get("stderr_tail"),
                    "duration_ms": duration_ms,
                    "ray": node,
                }),
            );
        }
        if let Some(o) = r
            .get("missing")
            .and_then(Value::as_array)
            .and_then(|m| m.first())
        {
            return StepOutput::new(
                "failed",
                json!({"reasons": [format!("declared output `{}` was not produced", o.as_str().unwrap_or(""))], "duration_ms": duration_ms, "ray": node}),
            );
        }
        let mut files = BTreeMap::new();
        for o in &req.step.outputs {
            let p = req.project.root.join(o);
            if !p.is_file() {
                return StepOutput::infra(
                    "error",
                    format!("output `{o}` did not arrive from the Ray cluster"),
                );
            }
            files.insert(o.clone(), p);
        }
        let mut out = StepOutput::new(
            "ok",
            json!({"exit_code": 0, "duration_ms": duration_ms, "ray": node}),
        );
        out.files = files;
        out
    }

    /// A candidate's step on its exported program, on a cluster judge (see `execute`).
    fn run_artifact(
        &self,
        req: &StepRequest,
        export_step: &str,
        files: &BTreeMap<String, String>,
    ) -> StepOutput {
        // Outside the project: the driver ships a folder that lies elsewhere, by content.
        let tmp = std::env::temp_dir().join("jb-exported");
        let (dir, imp) = match super::route::prepare_artifact(
            &req.project.cache_dir,
            &tmp,
            export_step,
            files,
            req.step.params.get("impl"),
        ) {
            Ok(d) => d,
            Err(o) => return o,
        };
        let mut out = self.run_worker_with(req, Some(imp), false);
        drop(dir);
        super::route::mark_artifact(&mut out, export_step);
        out
    }

    fn run_worker(&self, req: &StepRequest) -> StepOutput {
        self.run_worker_with(req, None, req.step.untrusted())
    }

    fn run_worker_with(&self, req: &StepRequest, imp: Option<Value>, fresh: bool) -> StepOutput {
        // Paths are as on this machine; the node rewrites them.
        let args = match super::request::worker_args(req, imp) {
            Ok(a) => a,
            Err(o) => return o,
        };
        let driver = match self.driver() {
            Ok(d) => d,
            Err(e) => return self.failure(e),
        };
        let op = req.step.kind.as_str();
        let request = json!({
            "op": op,
            "args": Value::Object(args),
            "fresh": fresh,
            "timeout_s": req.timeout.unwrap_or_else(crate::settings::default_step_timeout).as_secs_f64(),
            "project_root": req.project.root,
            "python_dir": self.spec.python_dir,
            "out_dir": req.out_dir,
            "expect_fingerprint": *lock(&self.expect_fingerprint),
        });
        let r = match driver.request("worker", request, Self::wait_limit(req), &req.cancel) {
            Ok(r) => r,
            Err(e) => return self.failure(e),
        };
        let mut out = worker_output(op, &r, &req.out_dir);
        if r.get("mismatch").is_some() {
            if let Some(f) = &self.on_mismatch {
                f();
            }
        }
        if let Value::Object(m) = &mut out.result {
            m.insert("ray".into(), node_info(&r));
        }
        out
    }
}

/// Where a step ran (recorded with its result).
fn node_info(r: &Value) -> Value {
    let node = r.get("node").cloned().unwrap_or(json!({}));
    json!({
        "node_id": node.get("node_id"),
        "node_ip": node.get("node_ip"),
        "attempts": r.get("attempts").cloned().unwrap_or(json!(1)),
        "retried_after": r.get("retried_after").cloned().unwrap_or(json!([])),
    })
}

/// A judge's answer as a step output (the same shapes as the local Python executor's).
fn worker_output(op: &str, r: &Value, out_dir: &Path) -> StepOutput {
    if let Some(diff) = r.get("mismatch") {
        return StepOutput::infra(
            "error",
            format!(
                "the node's environment differs from the fingerprint in the keys (field: [node, key]): {diff}; its result would be filed under the wrong machine, so nothing is kept (run again to re-probe the cluster)"
            ),
        );
    }
    if let Some(f) = r.get("failure").and_then(Value::as_str) {
        let msg = r.get("message").and_then(Value::as_str).unwrap_or("");
        let mut o = StepOutput::infra(f, msg);
        if let Value::Object(m) = &mut o.result {
            m.insert(
                "stderr_tail".into(),
                r.get("stderr_tail").cloned().unwrap_or(json!("")),
            );
        }
        return o;
    }
    let resp = r.get("response").cloned().unwrap_or(Value::Null);
    let mut out = if resp.get("ok").and_then(Value::as_bool) == Some(true) {
        let mut result = resp.get("result").cloned().unwrap_or(json!({}));
        let tail = r
            .get("stderr_tail")
            .and_then(Value::as_str)
            .filter(|t| !t.trim().is_empty());
        if let (Some(t), Value::Object(m)) = (tail, &mut result) {
            m.entry("stderr_tail").or_insert(json!(t));
        }
        let status = result
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or("ok")
            .to_string();
        StepOutput::new(status, result)
    } else {
        let err = resp.get("error").cloned().unwrap_or(Value::Null);
        let msg = err
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("unknown worker error");
        let mut o = StepOutput::infra("error", format!("harness error in `{op}`: {msg}"));
        if let Value::Object(m) = &mut o.result {
            m.insert("error".into(), err);
        }
        o
    };
    for name in r
        .get("files")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        let p: PathBuf = out_dir.join(name);
        if p.is_file() {
            out.files.insert(name.to_string(), p);
        }
    }
    out
}

impl Executor for RayExecutor {
    fn execute(&self, req: &StepRequest) -> StepOutput {
        if req.step.untrusted() && req.step.kind != StepKind::Export {
            // Judging an exported program is trusted work: it goes to the cluster's judges, with
            // the export's files shipped like any file a step names. The candidate's own code
            // (export, or every step where it could not be exported) stays in the local sandbox.
            if let super::route::Route::Artifact { export_step, files } =
                super::route::route(&req.step, &req.deps)
            {
                return self.run_artifact(req, &export_step, &files);
            }
        }
        if req.step.kind == StepKind::Export {
            // The untrusted stage: in jb's sandbox on a node (untrusted.rs).
            return self.run_export(req);
        }
        if req.step.untrusted() {
            return match &self.untrusted {
                Some(local) => local.execute(req),
                None => StepOutput::infra(
                    "error",
                    "candidate steps need the local sandboxed executor (internal: none configured)",
                ),
            };
        }
        match req.step.kind {
            StepKind::Command => self.run_command(req),
            k if k.uses_python() => self.run_worker(req),
            StepKind::Translate => {
                let handler = lock(&self.translate).clone();
                match handler {
                    Some(t) => t(req),
                    None => self.local.execute(req),
                }
            }
            _ => self.local.execute(req),
        }
    }

    fn cancel_all(&self) {
        if let Some(local) = &self.untrusted {
            local.cancel_all();
        }
        // The driver owns every task and judge: when it goes, Ray stops them.
        if let Some(d) = lock(&self.driver).take() {
            d.kill();
        }
    }

    fn shutdown(&self) {
        if let Some(local) = &self.untrusted {
            local.shutdown();
        }
        lock(&self.driver).take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judge_answers_become_step_outputs() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("trace")).unwrap();
        std::fs::write(dir.path().join("trace/t.json"), "{}").unwrap();
        let ok = json!({"response": {"ok": true, "result": {"status": "correct", "max_abs_err": 0.0}},
                        "files": ["trace/t.json", "absent.bin"], "node": {"node_id": "n1"}});
        let o = worker_output("verify", &ok, dir.path());
        assert_eq!(o.status, "correct");
        assert!(!o.infra);
        assert_eq!(o.files.keys().collect::<Vec<_>>(), ["trace/t.json"]);
        let lost = json!({"failure": "crashed", "message": "worker died", "stderr_tail": "boom"});
        let o = worker_output("profile", &lost, dir.path());
        assert!(o.infra);
        assert_eq!(o.status, "crashed");
        let other = json!({"mismatch": {"device_kind": ["TPU v6e", "TPU v5e"]}});
        let o = worker_output("profile", &other, dir.path());
        assert!(o.infra, "a result from another machine is never cached");
        assert!(o.result["reasons"][0].as_str().unwrap().contains("v6e"));
        let harness = json!({"response": {"ok": false, "error": {"message": "KeyError: x"}}});
        let o = worker_output("compile", &harness, dir.path());
        assert!(o.infra);
        assert!(o.result["reasons"][0]
            .as_str()
            .unwrap()
            .contains("KeyError"));
    }
}
