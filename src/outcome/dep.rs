//! An upstream step's result, as a dependant (an executor, or a report built from a step's
//! dependencies) sees it.

use serde_json::Value;

use super::StepStatus;
use crate::pipeline::template::Vars;

/// The result of an upstream step, as seen by a dependant.
#[derive(Debug, Clone)]
pub struct DepResult {
    pub step_id: String,
    pub kind: String,
    pub vars: Vars,
    pub status: StepStatus,
    pub result: Value,
    pub key: String,
}
