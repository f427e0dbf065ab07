//! The Python worker executor: long-lived workers speaking line-delimited JSON over stdio.
//!
//! Trusted implementations (the XLA reference, library baselines) share pooled workers, each
//! recycled after a number of requests (a Pallas-interpret executable holds many memory mappings,
//! so a worker must not live forever). Untrusted candidates get a fresh worker that is discarded
//! afterwards. A worker that dies, hangs past the timeout or exceeds the memory limit is killed
//! and its step gets the status `crashed` or `timeout`.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::child::{kill_group, rss_mb, spawn_tied_keeping};
use super::recheck;
use super::route::{self, Route};
use super::sandbox::{self, Jail, Sandbox, SandboxMode, Trust};
use super::{CancelFlag, StepOutput, StepRequest};
use crate::contract::worker::{self as protocol, Answer, Outcome, Ready};
use crate::pipeline::StepKind;

/// How the worker processes are started.
#[derive(Debug, Clone)]
pub struct WorkerSpec {
    pub python: PathBuf,
    pub python_dir: PathBuf,
    pub cwd: PathBuf,
    /// Extra environment (e.g. JAX_PLATFORMS).
    pub env: Vec<(String, String)>,
}

pub struct Worker {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    next_id: u64,
    pub requests: u32,
    /// A sandboxed worker's scratch folder (its one writable host folder) and when it was last
    /// measured: more than [`sandbox::scratch_limit`] there and the worker is killed.
    scratch: Option<(PathBuf, Instant)>,
}

const STDERR_LINES: usize = 40;

/// Why a request got no answer.
#[derive(Debug)]
pub enum WorkerFailure {
    Timeout,
    Cancelled,
    Died(String),
    OutOfMemory(u64),
    /// Bytes written into the sandbox's scratch folder past the limit.
    OutOfDisk(u64),
    Protocol(String),
}

impl Worker {
    /// Start a worker: pooled and trusted (`jail: None`), or inside the sandbox with `scratch`
    /// its one writable folder.
    pub fn start(
        spec: &WorkerSpec,
        startup_timeout: Duration,
        jail: Option<(&Sandbox, &Path, &Jail)>,
        cancel: &CancelFlag,
    ) -> Result<Worker, String> {
        let mut cmd = match jail {
            Some((sb, scratch, j)) => sb.command(
                scratch,
                &spec.cwd,
                &spec.env,
                &spec.python,
                &["-u", "-m", "jb.worker"],
                Some(j),
            ),
            None => {
                let mut cmd = Command::new(&spec.python);
                cmd.args(["-u", "-m", "jb.worker"])
                    .current_dir(&spec.cwd)
                    .env("PYTHONPATH", &spec.python_dir)
                    .env("PYTHONDONTWRITEBYTECODE", "1")
                    .env("TF_CPP_MIN_LOG_LEVEL", "2");
                for (k, v) in &spec.env {
                    cmd.env(k, v);
                }
                cmd
            }
        };
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let what = if jail.is_some() {
            "the sandboxed worker"
        } else {
            "the worker"
        };
        let mut child = spawn_tied_keeping(cmd, jail.and_then(|(_, _, j)| j.keep_fd()))
            .map_err(|e| format!("cannot start {what} ({}): {e}", spec.python.display()))?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => {
                        if tx.send(l).is_err() {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        });
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let tail2 = tail.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(l) = line else { break };
                let mut t = tail2.lock().unwrap_or_else(|p| p.into_inner());
                if t.len() >= STDERR_LINES {
                    t.pop_front();
                }
                t.push_back(l);
            }
        });
        let mut w = Worker {
            scratch: jail.map(|(_, scratch, _)| (scratch.to_path_buf(), Instant::now())),
            child,
            stdin,
            lines: rx,
            stderr_tail: tail,
            next_id: 1,
            requests: 0,
        };
        // The first line is the worker's ready line, its protocol version checked.
        let first = w
            .read_message(startup_timeout, None, cancel, |v| v.get("event").is_some())
            .and_then(|v| Ready::decode(v).map_err(|e| WorkerFailure::Protocol(e.to_string())));
        match first {
            Ok(_) => Ok(w),
            Err(f) => {
                let tail = w.stderr_tail();
                w.kill();
                Err(format!("worker did not start ({f:?}): {tail}"))
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stderr_tail(&self) -> String {
        let t = self.stderr_tail.lock().unwrap_or_else(|p| p.into_inner());
        t.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    pub fn kill(&mut self) {
        kill_group(self.child.id());
        let _ = self.child.wait();
    }

    fn read_message(
        &mut self,
        timeout: Duration,
        memory_mb: Option<u64>,
        cancel: &CancelFlag,
        accept: impl Fn(&Value) -> bool,
    ) -> Result<Value, WorkerFailure> {
        let start = Instant::now();
        loop {
            match self.lines.recv_timeout(Duration::from_millis(100)) {
                Ok(line) => {
                    let Ok(v) = serde_json::from_str::<Value>(&line) else {
                        // Not protocol: user output that escaped; keep it as stderr.
                        let mut t = self.stderr_tail.lock().unwrap_or_else(|p| p.into_inner());
                        t.push_back(format!("[stdout] {line}"));
                        continue;
                    };
                    if accept(&v) {
                        return Ok(v);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self
                        .child
                        .wait()
                        .map(|s| s.to_string())
                        .unwrap_or_else(|e| e.to_string());
                    // Give the stderr reader a moment to drain.
                    std::thread::sleep(Duration::from_millis(50));
                    return Err(WorkerFailure::Died(status));
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            if cancel.is_cancelled() {
                return Err(WorkerFailure::Cancelled);
            }
            if start.elapsed() > timeout {
                return Err(WorkerFailure::Timeout);
            }
            if let Some(limit) = memory_mb {
                let rss = rss_mb(self.child.id());
                if rss > limit {
                    return Err(WorkerFailure::OutOfMemory(rss));
                }
            }
            if let Some((dir, last)) = &mut self.scratch {
                if last.elapsed() >= Duration::from_secs(1) {
                    *last = Instant::now();
                    let used = dir_bytes(dir);
                    if used > sandbox::scratch_limit() {
                        return Err(WorkerFailure::OutOfDisk(used));
                    }
                }
            }
        }
    }

    /// Send one request and wait for its answer.
    pub fn request(
        &mut self,
        op: &str,
        args: Value,
        timeout: Duration,
        memory_mb: Option<u64>,
        cancel: &CancelFlag,
    ) -> Result<Value, WorkerFailure> {
        let id = self.next_id;
        self.next_id += 1;
        self.requests += 1;
        let line = protocol::Request::new(id, op, args).line();
        if writeln!(self.stdin, "{line}")
            .and_then(|_| self.stdin.flush())
            .is_err()
        {
            let status = self.child.wait().map(|s| s.to_string()).unwrap_or_default();
            return Err(WorkerFailure::Died(status));
        }
        self.read_message(timeout, memory_mb, cancel, |v| {
            v.get("id").and_then(Value::as_u64) == Some(id)
        })
    }

    /// After the one answer of a fresh worker: ask it to shut down and require that answer as
    /// the very next protocol line. Candidate code shares the worker's process, so it can write
    /// a forged answer on the protocol pipe; it is then caught when it exits before the worker
    /// could answer, or when the worker's own answer follows the forged one.
    pub fn epilogue(&mut self, cancel: &CancelFlag) -> Result<(), String> {
        let id = self.next_id;
        self.next_id += 1;
        let line = protocol::Request::new(id, "shutdown", json!({})).line();
        if writeln!(self.stdin, "{line}")
            .and_then(|_| self.stdin.flush())
            .is_err()
        {
            return Err("the worker was gone right after its answer".into());
        }
        let next = self.read_message(Duration::from_secs(60), None, cancel, |v| {
            v.get("id").is_some()
        });
        match next {
            Ok(v) if v.get("id").and_then(Value::as_u64) == Some(id) => Ok(()),
            Ok(v) => Err(format!(
                "a second answer to request {} came after the first",
                v.get("id").cloned().unwrap_or(Value::Null)
            )),
            Err(WorkerFailure::Cancelled) => Ok(()),
            Err(WorkerFailure::Died(s)) => Err(format!(
                "the worker exited ({s}) right after its answer, before it could shut down"
            )),
            Err(f) => Err(format!(
                "the worker did not shut down after its answer ({f:?})"
            )),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = writeln!(
            self.stdin,
            "{}",
            protocol::Request::new(0, "shutdown", json!({})).line()
        );
        let _ = self.stdin.flush();
        // Give it a moment to exit by itself, then make sure.
        for _ in 0..20 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
    }
}

/// How untrusted candidate code may run (from the command line).
#[derive(Debug, Clone)]
pub struct UntrustedPolicy {
    /// `--no-sandbox`: run candidates without the OS sandbox (results say `trust: unsandboxed`).
    pub no_sandbox: bool,
    pub cache_dir: PathBuf,
    pub pyenv: PathBuf,
}

/// Where one request runs.
#[derive(Clone, Copy)]
enum Placement<'a> {
    /// A pooled trusted worker.
    Pooled,
    /// A fresh worker without the sandbox, discarded afterwards.
    Fresh,
    /// A fresh worker inside the sandbox, this scratch folder its one writable place, under
    /// the kernel's limits of this jail.
    Jailed(&'a Sandbox, &'a Path, &'a Jail),
}

impl Placement<'_> {
    fn fresh(self) -> bool {
        !matches!(self, Placement::Pooled)
    }
}

pub struct PythonExecutor {
    pub spec: WorkerSpec,
    /// Idle pooled workers, each with the device unit it was started for.
    pool: Mutex<Vec<(Option<u32>, Worker)>>,
    live: Mutex<Vec<u32>>,
    pub max_requests_per_worker: u32,
    pub default_timeout: Duration,
    pub default_memory_mb: Option<u64>,
    /// How candidates run; `None`: this executor refuses untrusted steps.
    pub untrusted: Option<UntrustedPolicy>,
    mode: OnceLock<SandboxMode>,
    /// How workers are pinned to a device (one judge per device on TPU/GPU).
    pub devices: super::devices::DeviceBinding,
    /// Start the next candidate's sandboxed export worker while one runs (`super::prestart`).
    pub prestart: bool,
    ahead: super::prestart::Ahead,
    /// Prepared workers handed to `take_worker` for the jail whose scratch folder they run in.
    handoff: Mutex<Vec<(PathBuf, Worker)>>,
}

impl PythonExecutor {
    pub fn new(spec: WorkerSpec) -> Self {
        PythonExecutor {
            spec,
            pool: Mutex::new(Vec::new()),
            live: Mutex::new(Vec::new()),
            max_requests_per_worker: 40,
            default_timeout: crate::settings::default_step_timeout(),
            // Every worker has a memory cap, trusted ones too (a judge reading a hostile
            // artifact or dumped output): half the host's memory, at most 16 GiB, unless the
            // step or the command line sets one.
            default_memory_mb: Some(super::sandbox::default_memory_bytes() >> 20),
            untrusted: None,
            mode: OnceLock::new(),
            devices: Default::default(),
            prestart: std::env::var("JB_PRESTART").map_or(true, |v| v.trim() != "0"),
            ahead: Default::default(),
            handoff: Mutex::new(Vec::new()),
        }
    }

    /// An executor that runs untrusted steps as `policy` says.
    pub fn with_untrusted(mut self, policy: UntrustedPolicy) -> Self {
        self.untrusted = Some(policy);
        self
    }

    /// How candidate code runs here (the sandbox is probed once, on first use).
    pub fn sandbox_mode(&self) -> SandboxMode {
        self.mode
            .get_or_init(|| match &self.untrusted {
                None => SandboxMode::Unavailable(sandbox::SandboxError::CannotStart {
                    bwrap: PathBuf::from("bwrap"),
                    message: "this command does not run candidate code".into(),
                }),
                Some(u) => sandbox::mode(
                    u.no_sandbox,
                    &self.spec.cwd,
                    &self.spec.python_dir,
                    &u.pyenv,
                    &u.cache_dir,
                ),
            })
            .clone()
    }

    fn take_worker(
        &self,
        placement: Placement,
        device: Option<u32>,
        cancel: &CancelFlag,
        export: bool,
    ) -> Result<Worker, String> {
        let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        if let Placement::Pooled = placement {
            if let Some(i) = pool.iter().position(|(d, _)| *d == device) {
                return Ok(pool.swap_remove(i).1);
            }
        } else if device.is_some() && self.devices.exclusive_owner() {
            // One process owns a TPU chip: a sandboxed step that needs it stops the device's
            // idle judge first (admission gives the unit to one step at a time).
            let (evicted, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut *pool)
                .into_iter()
                .partition(|(d, _)| *d == device);
            *pool = kept;
            drop(pool);
            for (_, w) in evicted {
                self.forget(w);
            }
        } else {
            drop(pool);
        }
        let jail = match placement {
            Placement::Jailed(sb, scratch, j) => Some((sb, scratch, j)),
            _ => None,
        };
        let handed = jail.and_then(|(_, scratch, _)| {
            let mut handoff = self.handoff.lock().unwrap_or_else(|p| p.into_inner());
            let i = handoff.iter().position(|(s, _)| s == scratch)?;
            Some(handoff.swap_remove(i).1)
        });
        let w = match handed {
            // Started ahead in this very jail (super::prestart), for this one candidate.
            Some(w) => w,
            None => Worker::start(
                &self.worker_spec(device, export),
                Duration::from_secs(300),
                jail,
                cancel,
            )?,
        };
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(w.pid());
        Ok(w)
    }

    /// How a worker for `device` is started (`export`: with the export stage's environment).
    fn worker_spec(&self, device: Option<u32>, export: bool) -> WorkerSpec {
        let mut spec = self.spec.clone();
        spec.env.extend(self.devices.env(device));
        if export {
            // After the session's JAX_PLATFORMS: the last setting wins.
            spec.env.extend(self.devices.export_env());
        }
        spec
    }

    fn give_back(&self, w: Worker, device: Option<u32>) {
        if w.requests < self.max_requests_per_worker {
            self.pool
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((device, w));
        } else {
            self.forget(w);
        }
    }

    fn forget(&self, w: Worker) {
        let pid = w.pid();
        drop(w);
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|p| *p != pid);
    }

    /// One op on a pooled (or, for untrusted code, fresh) worker, outside the sandbox.
    pub fn call(
        &self,
        op: &str,
        args: Value,
        fresh: bool,
        timeout: Duration,
        memory_mb: Option<u64>,
        cancel: &CancelFlag,
    ) -> StepOutput {
        let placement = if fresh {
            Placement::Fresh
        } else {
            Placement::Pooled
        };
        self.call_on(op, args, placement, None, timeout, memory_mb, cancel)
    }

    #[allow(clippy::too_many_arguments)]
    fn call_on(
        &self,
        op: &str,
        args: Value,
        placement: Placement,
        device: Option<u32>,
        timeout: Duration,
        memory_mb: Option<u64>,
        cancel: &CancelFlag,
    ) -> StepOutput {
        let fresh = placement.fresh();
        let export = op == StepKind::Export.as_str() && placement.fresh();
        let mut w = match self.take_worker(placement, device, cancel, export) {
            Ok(w) => w,
            Err(_) if cancel.is_cancelled() => {
                return StepOutput::infra("cancelled", "interrupted")
            }
            Err(e) => return StepOutput::infra("error", e),
        };
        let pid = w.pid();
        let answer = w.request(op, args, timeout, memory_mb, cancel);
        if let (Placement::Jailed(_, _, j), Ok(_)) = (placement, &answer) {
            j.take_products();
        }
        let forged = match (&answer, fresh) {
            (Ok(_), true) => w.epilogue(cancel).err(),
            _ => None,
        };
        if let Some(why) = forged {
            let tail = w.stderr_tail();
            w.kill();
            self.forget(w);
            let mut o = StepOutput::new(
                "rejected",
                json!({"reasons": [format!("forged worker answer: {why}")], "stderr_tail": tail}),
            );
            if let (Value::Object(m), Ok(v)) = (&mut o.result, &answer) {
                m.insert(
                    "claimed".into(),
                    v.get("result").cloned().unwrap_or(Value::Null),
                );
            }
            return o;
        }
        match answer {
            Ok(v) => {
                // An untrusted candidate's own output (warnings, prints, tracebacks on stderr)
                // is part of what it gets back as feedback; pooled workers' output is shared.
                let tail = fresh
                    .then(|| w.stderr_tail())
                    .filter(|t| !t.trim().is_empty());
                if fresh {
                    self.forget(w);
                } else {
                    self.give_back(w, device);
                }
                match Answer::decode(v).and_then(|a| a.outcome()) {
                    Ok(Outcome::Result { status, result }) => {
                        let mut result = Value::Object(result);
                        if let (Some(t), Value::Object(m)) = (tail, &mut result) {
                            m.entry("stderr_tail").or_insert(json!(t));
                        }
                        if let Value::Object(m) = &mut result {
                            m.insert("worker_pid".into(), json!(pid));
                        }
                        StepOutput::new(status.as_str(), result)
                    }
                    Ok(Outcome::HarnessError(err)) => {
                        let mut o = StepOutput::infra(
                            "error",
                            format!("harness error in `{op}`: {}", err.message),
                        );
                        if let Value::Object(m) = &mut o.result {
                            m.insert("error".into(), json!(err));
                        }
                        o
                    }
                    // A fresh worker ran candidate code in its own process, and that code can
                    // write on the protocol pipe: an answer outside the contract is its doing.
                    Err(e) if fresh => StepOutput::new(
                        "rejected",
                        json!({"reasons": [format!("malformed worker answer: {e}")]}),
                    ),
                    Err(e) => StepOutput::infra("error", e.to_string()),
                }
            }
            Err(f) => {
                let tail = w.stderr_tail();
                w.kill();
                self.forget(w);
                // A worker killed because jb was interrupted died of the interrupt.
                let f = match f {
                    WorkerFailure::Died(_) if cancel.is_cancelled() => WorkerFailure::Cancelled,
                    f => f,
                };
                let (status, reason) = match f {
                    WorkerFailure::Timeout => (
                        "timeout".to_string(),
                        format!(
                            "no answer within {:.0} s; worker killed",
                            timeout.as_secs_f64()
                        ),
                    ),
                    WorkerFailure::Cancelled => {
                        ("cancelled".to_string(), "interrupted".to_string())
                    }
                    WorkerFailure::Died(s) => ("crashed".to_string(), format!("worker died ({s})")),
                    WorkerFailure::OutOfMemory(mb) => (
                        "crashed".to_string(),
                        format!(
                            "memory limit exceeded: {mb} MiB > {} MiB; worker killed",
                            memory_mb.unwrap_or(0)
                        ),
                    ),
                    WorkerFailure::OutOfDisk(bytes) => (
                        "crashed".to_string(),
                        format!(
                            "wrote {} MiB into its sandbox scratch folder, more than {} MiB; worker killed",
                            bytes >> 20,
                            sandbox::scratch_limit() >> 20
                        ),
                    ),
                    WorkerFailure::Protocol(m) => ("crashed".to_string(), m),
                };
                let mut o = StepOutput::infra(status, reason);
                if let Value::Object(m) = &mut o.result {
                    m.insert("stderr_tail".into(), json!(tail));
                }
                o
            }
        }
    }

    pub fn run_step(&self, req: &StepRequest) -> StepOutput {
        let mut args = match super::request::worker_args(req, None) {
            Ok(a) => a,
            Err(o) => return o,
        };
        let timeout = req.timeout.unwrap_or(self.default_timeout);
        let memory = req.memory_mb.or(self.default_memory_mb);
        let op = req.step.kind.as_str();
        if req.step.kind == StepKind::Export && self.devices.accelerator() {
            // Exported from CPU for the fingerprint's device (jb.platforms), see `export_env`.
            if let Some(kind) = &self.devices.kind {
                args.entry("device_kind").or_insert_with(|| json!(kind));
            }
        }
        let (mut out, trust) = match route::route(&req.step, &req.deps) {
            Route::Pooled => (
                self.call_on(
                    op,
                    Value::Object(args),
                    Placement::Pooled,
                    req.device,
                    timeout,
                    memory,
                    &req.cancel,
                ),
                None,
            ),
            Route::Artifact { export_step, files } => {
                let cache = &req.project.cache_dir;
                let (dir, imp) = match route::prepare_artifact(
                    cache,
                    &cache.join("tmp"),
                    &export_step,
                    &files,
                    args.get("impl"),
                ) {
                    Ok(d) => d,
                    Err(o) => return o,
                };
                args.insert("impl".into(), imp);
                let mut o = self.call_on(
                    op,
                    Value::Object(args),
                    Placement::Pooled,
                    req.device,
                    timeout,
                    memory,
                    &req.cancel,
                );
                drop(dir);
                route::mark_artifact(&mut o, &export_step);
                (o, Some(Trust::Artifact))
            }
            Route::Candidate => {
                // A verdict reached in the candidate's own process is judged again outside it.
                let recheck_args = if req.step.kind == StepKind::Verify {
                    if let Err(e) = recheck::prepare(&mut args) {
                        return StepOutput::infra("error", format!("cannot draw a seed: {e}"));
                    }
                    Some(recheck::request(&args, &req.out_dir))
                } else {
                    None
                };
                let (mut o, t) = match self.sandbox_mode() {
                    SandboxMode::Unavailable(e) => {
                        return StepOutput::infra("error", sandbox::refusal(&e));
                    }
                    SandboxMode::Off => (
                        self.call_on(
                            op,
                            Value::Object(args),
                            Placement::Fresh,
                            req.device,
                            timeout,
                            memory,
                            &req.cancel,
                        ),
                        Some(Trust::Unsandboxed),
                    ),
                    SandboxMode::On(sb) => match self.run_jailed(&sb, req, args, timeout, memory) {
                        Ok(o) => (o, Some(Trust::Sandboxed)),
                        Err(e) => return StepOutput::infra("error", e),
                    },
                };
                if let Some(rargs) = recheck_args {
                    if o.status == super::StepStatus::Correct {
                        let r = self.call_on(
                            "recheck",
                            rargs,
                            Placement::Pooled,
                            req.device,
                            timeout,
                            memory,
                            &req.cancel,
                        );
                        recheck::apply(&mut o, r);
                    }
                    let _ = std::fs::remove_dir_all(req.out_dir.join(recheck::OUTPUTS_DIR));
                }
                (o, t)
            }
        };
        // Files the op wrote into out_dir (and its sub-folders, such as the profiler trace in
        // `trace/`) are kept, named by their path relative to out_dir. Links are not followed.
        out.files.extend(regular_files(&req.out_dir));
        if req.step.kind == StepKind::Export {
            return route::settle_export(out, trust);
        }
        if let (Some(t), Value::Object(m)) = (trust, &mut out.result) {
            // jb's own account of where the code ran; whatever the worker said is overwritten.
            m.insert("trust".into(), json!(t.as_str()));
        }
        out
    }

    /// Run an untrusted step in a fresh sandboxed worker: the candidate file copied into a
    /// private scratch folder outside the cache, which is also the op's out_dir; jb moves the
    /// files it wrote into the step's folder afterwards.
    fn run_jailed(
        &self,
        sb: &Sandbox,
        req: &StepRequest,
        mut args: serde_json::Map<String, Value>,
        timeout: Duration,
        memory: Option<u64>,
    ) -> Result<StepOutput, String> {
        let export = req.step.kind == StepKind::Export;
        // An export step (CPU only, never an exclusive device) takes the sandbox started for it
        // ahead, if one is ready, and has the next one started (super::prestart).
        let ahead =
            (self.prestart && export && (req.device.is_none() || !self.devices.exclusive_owner()))
                .then(|| {
                    let spec = self.worker_spec(req.device, true);
                    let settings = super::prestart::Settings {
                        memory_mb: memory,
                        cache_dir: req.project.cache_dir.clone(),
                        bwrap: sb.bwrap.clone(),
                        env: spec.env.clone(),
                    };
                    let taken = self.ahead.take(&settings);
                    self.ahead.start_one(sb, &spec, settings);
                    taken
                })
                .flatten();
        let (scratch, staging, mut jail) = match ahead {
            Some(p) => {
                self.handoff
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((p.scratch.path().to_path_buf(), p.worker));
                (p.scratch, p.staging, p.jail)
            }
            None => super::prestart::fresh_jail(sb, &req.project.cache_dir, memory)?,
        };
        let out_dir = scratch.path().join("out");
        let cand_dir = scratch.path().join("candidate");
        jail.products = Some((out_dir.clone(), staging.path().to_path_buf(), export));
        if let Some(Value::Object(imp)) = args.get_mut("impl") {
            if let Some(path) = imp.get("path").and_then(Value::as_str) {
                let src = req.project.root.join(path);
                if let (true, Some(name)) = (src.is_file(), src.file_name()) {
                    let copy = cand_dir.join(name);
                    std::fs::copy(&src, &copy)
                        .map_err(|e| format!("copying {} into the sandbox: {e}", src.display()))?;
                    imp.insert("path".into(), json!(copy));
                }
            }
        }
        args.insert("out_dir".into(), json!(out_dir));
        let mut out = self.call_on(
            req.step.kind.as_str(),
            Value::Object(args),
            Placement::Jailed(sb, scratch.path(), &jail),
            req.device,
            timeout,
            memory,
            &req.cancel,
        );
        // No answer (crashed, killed, timed out): what is left, once nothing runs any more.
        if let Some(g) = &jail.group {
            g.kill_all();
        }
        jail.take_products();
        let taken = jail
            .taken
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_default();
        jail.annotate(&mut out, &taken);
        drop(jail);
        for name in &taken.kept {
            let (src, dest) = (staging.path().join(name), req.out_dir.join(name));
            if let Some(parent) = dest.parent() {
                let _ = std::fs::create_dir_all(parent);
            }
            if std::fs::rename(&src, &dest).is_err() {
                std::fs::copy(&src, &dest)
                    .map_err(|e| format!("moving {name} out of the sandbox: {e}"))?;
            }
        }
        Ok(out)
    }

    pub fn kill_all(&self) {
        for pid in self.live.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            kill_group(*pid);
        }
    }

    pub fn close(&self) {
        self.ahead.clear();
        self.handoff
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        let workers: Vec<(Option<u32>, Worker)> =
            std::mem::take(&mut *self.pool.lock().unwrap_or_else(|p| p.into_inner()));
        for (_, w) in workers {
            self.forget(w);
        }
    }
}

/// The bytes of the regular files under `dir` (links not followed).
fn dir_bytes(dir: &Path) -> u64 {
    regular_files(dir)
        .iter()
        .filter_map(|(_, p)| p.symlink_metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// The regular files under `dir` (links neither followed nor kept), by path relative to `dir`.
pub fn regular_files(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(t) = e.file_type() else { continue };
            let p = e.path();
            if t.is_dir() {
                stack.push(p);
            } else if t.is_file() {
                if let Ok(rel) = p.strip_prefix(dir) {
                    out.push((rel.to_string_lossy().replace('\\', "/"), p));
                }
            }
        }
    }
    out
}

/// The interpreter inside a virtual environment.
pub fn venv_python(pyenv: &Path) -> PathBuf {
    pyenv.join("bin").join("python")
}
