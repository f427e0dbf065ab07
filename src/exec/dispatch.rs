//! The real executor: dispatches each step to the executor of its kind.

use serde_json::json;

use super::python::PythonExecutor;
use super::{builtin, command, Executor, StepOutput, StepRequest};
use crate::pipeline::StepKind;

/// A handler for one step kind implemented outside this module.
pub type Handler = Box<dyn Fn(&StepRequest) -> StepOutput + Send + Sync>;

pub struct Dispatch {
    /// Started only when a Python step runs.
    pub python: Option<PythonExecutor>,
    /// Extra handlers for kinds implemented elsewhere (e.g. `translate`).
    pub translate: Option<Handler>,
}

impl Executor for Dispatch {
    fn execute(&self, req: &StepRequest) -> StepOutput {
        match req.step.kind {
            StepKind::Command => command::run(req),
            StepKind::Grid => builtin::grid(req),
            StepKind::Aggregate => builtin::aggregate(req),
            StepKind::Compile | StepKind::Verify | StepKind::Profile | StepKind::Export => {
                match &self.python {
                    Some(py) => py.run_step(req),
                    None => StepOutput::infra("error", "no Python environment configured"),
                }
            }
            StepKind::Translate => match &self.translate {
                Some(t) => t(req),
                None => StepOutput::new(
                    "failed",
                    json!({"reasons": ["translate steps run through `jb agent`"]}),
                ),
            },
        }
    }

    fn cancel_all(&self) {
        if let Some(py) = &self.python {
            py.kill_all();
        }
    }

    fn shutdown(&self) {
        if let Some(py) = &self.python {
            py.close();
        }
    }
}
