//! Executors: what runs a step. The scheduler hands each ready step to an [`Executor`]; the
//! real one dispatches by step kind (shell command, Python worker, built-in), the fake one lets
//! the engine be tested without Python.

pub mod builtin;
pub mod cgroup;
pub mod child;
pub mod command;
pub mod devices;
pub mod dispatch;
pub mod fake;
pub mod prestart;
pub mod products;
pub mod python;
pub mod ray;
pub mod recheck;
pub mod request;
pub mod results;
pub mod route;
pub mod sandbox;
pub mod seccomp;
pub mod stderr_tail;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::Value;

use crate::pipeline::Step;
use crate::project::Project;
// The outcome vocabulary lives in `crate::outcome`; these paths stay for existing callers.
pub use crate::outcome::status;
pub use crate::outcome::{DepResult, StepStatus};

/// Everything an executor needs to run one step.
#[derive(Debug, Clone)]
pub struct StepRequest {
    pub step: Step,
    pub key: String,
    pub project: Arc<Project>,
    pub scale: String,
    pub backend: String,
    pub deps: Vec<DepResult>,
    /// A fresh, empty folder for the step's files (moved into the CAS afterwards).
    pub out_dir: PathBuf,
    pub timeout: Option<std::time::Duration>,
    pub memory_mb: Option<u64>,
    pub cancel: CancelFlag,
    /// The device unit the step holds (admission's grant): its worker is that device's judge.
    pub device: Option<u32>,
    /// The device peak a profile step's roofline guard judges against (`KeyContext::peak`).
    pub peak: Option<Value>,
}

/// What a step produced.
#[derive(Debug, Clone)]
pub struct StepOutput {
    pub status: StepStatus,
    pub result: Value,
    /// Files to keep: name -> path (in `out_dir` or, for commands, in the project).
    pub files: BTreeMap<String, PathBuf>,
    /// True when the failure is the infrastructure's (timeout, crash, harness error), not the
    /// implementation's: such results are not cached unless the step asks.
    pub infra: bool,
}

impl StepOutput {
    /// `status` is a status or its name; a name outside the vocabulary becomes `error` (the
    /// result keeps the name it came with, and says why).
    pub fn new(status: impl AsRef<str>, result: Value) -> Self {
        let name = status.as_ref();
        let parsed = name.parse::<StepStatus>();
        let status = parsed.clone().unwrap_or(StepStatus::Error);
        let mut result = result;
        if let Value::Object(m) = &mut result {
            m.entry("status")
                .or_insert_with(|| Value::String(name.to_string()));
            if let Err(e) = parsed {
                let reasons = m
                    .entry("reasons")
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(a) = reasons {
                    a.push(Value::String(format!("harness error: {e}")));
                }
            }
        }
        StepOutput {
            status,
            result,
            files: BTreeMap::new(),
            infra: false,
        }
    }

    pub fn infra(status: impl AsRef<str>, message: impl Into<String>) -> Self {
        let mut o = StepOutput::new(status, serde_json::json!({"reasons": [message.into()]}));
        o.infra = true;
        o
    }
}

/// Runs steps. Implementations must be callable from several threads at once.
pub trait Executor: Send + Sync {
    fn execute(&self, req: &StepRequest) -> StepOutput;
    /// Stop everything in flight (Ctrl-C): kill workers and child processes.
    fn cancel_all(&self) {}
    /// Release long-lived resources (workers) at the end of a build.
    fn shutdown(&self) {}
}

/// Shared cancellation flag.
#[derive(Debug, Clone, Default)]
pub struct CancelFlag(Arc<AtomicBool>);

impl CancelFlag {
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}
