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
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::child::{kill_group, rss_mb};
use super::{CancelFlag, StepOutput, StepRequest};

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
}

const STDERR_LINES: usize = 40;

/// Why a request got no answer.
#[derive(Debug)]
pub enum WorkerFailure {
    Timeout,
    Cancelled,
    Died(String),
    OutOfMemory(u64),
    Protocol(String),
}

impl Worker {
    pub fn start(spec: &WorkerSpec, startup_timeout: Duration) -> Result<Worker, String> {
        let mut cmd = Command::new(&spec.python);
        cmd.args(["-u", "-m", "jb.worker"])
            .current_dir(&spec.cwd)
            .env("PYTHONPATH", &spec.python_dir)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("TF_CPP_MIN_LOG_LEVEL", "2")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        for (k, v) in &spec.env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", spec.python.display()))?;
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
            child,
            stdin,
            lines: rx,
            stderr_tail: tail,
            next_id: 1,
            requests: 0,
        };
        let cancel = CancelFlag::default();
        match w.read_message(startup_timeout, None, &cancel, |v| {
            v.get("event").and_then(Value::as_str) == Some("ready")
        }) {
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
        let line = json!({"id": id, "op": op, "args": args}).to_string();
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
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = writeln!(
            self.stdin,
            "{}",
            json!({"id": 0, "op": "shutdown", "args": {}})
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

pub struct PythonExecutor {
    pub spec: WorkerSpec,
    pool: Mutex<Vec<Worker>>,
    live: Mutex<Vec<u32>>,
    pub max_requests_per_worker: u32,
    pub default_timeout: Duration,
    pub default_memory_mb: Option<u64>,
    /// The device peak {flops_per_s, bytes_per_s, source} profile steps get as `peak` (their
    /// roofline guard); not part of any key.
    pub peak: Option<Value>,
}

impl PythonExecutor {
    pub fn new(spec: WorkerSpec) -> Self {
        PythonExecutor {
            spec,
            pool: Mutex::new(Vec::new()),
            live: Mutex::new(Vec::new()),
            max_requests_per_worker: 40,
            default_timeout: Duration::from_secs(1800),
            default_memory_mb: None,
            peak: None,
        }
    }

    fn take_worker(&self, fresh: bool) -> Result<Worker, String> {
        if !fresh {
            if let Some(w) = self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop() {
                return Ok(w);
            }
        }
        let w = Worker::start(&self.spec, Duration::from_secs(300))?;
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(w.pid());
        Ok(w)
    }

    fn give_back(&self, w: Worker) {
        if w.requests < self.max_requests_per_worker {
            self.pool.lock().unwrap_or_else(|p| p.into_inner()).push(w);
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

    /// One op on a pooled (or, for untrusted code, fresh) worker.
    pub fn call(
        &self,
        op: &str,
        args: Value,
        fresh: bool,
        timeout: Duration,
        memory_mb: Option<u64>,
        cancel: &CancelFlag,
    ) -> StepOutput {
        let mut w = match self.take_worker(fresh) {
            Ok(w) => w,
            Err(e) => return StepOutput::infra("error", e),
        };
        let pid = w.pid();
        let answer = w.request(op, args, timeout, memory_mb, cancel);
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
                    self.give_back(w);
                }
                if v.get("ok").and_then(Value::as_bool) == Some(true) {
                    let mut result = v.get("result").cloned().unwrap_or(json!({}));
                    if let (Some(t), Value::Object(m)) = (tail, &mut result) {
                        m.entry("stderr_tail").or_insert(json!(t));
                    }
                    let status = result
                        .get("status")
                        .and_then(Value::as_str)
                        .unwrap_or("ok")
                        .to_string();
                    if let Value::Object(m) = &mut result {
                        m.insert("worker_pid".into(), json!(pid));
                    }
                    StepOutput::new(status, result)
                } else {
                    let err = v.get("error").cloned().unwrap_or(Value::Null);
                    let msg = err
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("unknown worker error");
                    let mut o =
                        StepOutput::infra("error", format!("harness error in `{op}`: {msg}"));
                    if let Value::Object(m) = &mut o.result {
                        m.insert("error".into(), err);
                    }
                    o
                }
            }
            Err(f) => {
                let tail = w.stderr_tail();
                w.kill();
                self.forget(w);
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
        let mut args = match &req.step.params {
            Value::Object(m) => m.clone(),
            Value::Null => serde_json::Map::new(),
            other => {
                return StepOutput::new(
                    "failed",
                    json!({"reasons": [format!("params must be a mapping, got {other}")]}),
                );
            }
        };
        args.insert("scale".into(), json!(req.scale));
        args.insert("backend".into(), json!(req.backend));
        args.insert("out_dir".into(), json!(req.out_dir));
        args.insert("project_root".into(), json!(req.project.root));
        if req.step.kind == crate::pipeline::StepKind::Profile {
            if let Some(p) = &self.peak {
                args.entry("peak").or_insert_with(|| p.clone());
            }
        }
        // Upstream results the op may use (e.g. the reference's FLOPs for a kernel's profile).
        args.insert(
            "upstream".into(),
            Value::Array(req.deps.iter().map(|d| json!({"step": d.step_id, "kind": d.kind, "status": d.status, "result": d.result})).collect()),
        );
        let timeout = req.timeout.unwrap_or(self.default_timeout);
        let memory = req.memory_mb.or(self.default_memory_mb);
        let mut out = self.call(
            req.step.kind.as_str(),
            Value::Object(args),
            req.step.untrusted(),
            timeout,
            memory,
            &req.cancel,
        );
        // Files the op wrote into out_dir (and its sub-folders, such as the profiler trace in
        // `trace/`) are kept, named by their path relative to out_dir.
        let mut stack = vec![req.out_dir.clone()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.is_file() {
                    if let Ok(rel) = p.strip_prefix(&req.out_dir) {
                        let name = rel.to_string_lossy().replace('\\', "/");
                        out.files.insert(name, p);
                    }
                }
            }
        }
        out
    }

    pub fn kill_all(&self) {
        for pid in self.live.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            kill_group(*pid);
        }
    }

    pub fn close(&self) {
        let workers: Vec<Worker> =
            std::mem::take(&mut *self.pool.lock().unwrap_or_else(|p| p.into_inner()));
        for w in workers {
            self.forget(w);
        }
    }
}

/// The interpreter inside a virtual environment.
pub fn venv_python(pyenv: &Path) -> PathBuf {
    pyenv.join("bin").join("python")
}
