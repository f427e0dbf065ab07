//! Step statuses and what they mean for the build.
//!
//! One vocabulary, shared with the Python worker (`python/jb/status.py`; a test checks that both
//! list the same names). A status answers the questions the engine and the reports ask of it:
//! did the step fail, does it block its dependants, what does a blocked dependant inherit, and
//! which outcome class of an evaluated candidate it stands for.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// What became of one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Ran and produced its result.
    Ok,
    /// A verified kernel matched the reference.
    Correct,
    /// A command exited non-zero (or a step could not do its job).
    Failed,
    /// The harness failed (not the implementation's fault).
    Error,
    /// The implementation did not import, trace, lower or compile.
    CompileError,
    /// The implementation raised or produced no usable value when run.
    RuntimeError,
    /// The implementation's output does not match the reference.
    Incorrect,
    /// The implementation was caught gaming the harness.
    Rejected,
    /// The step ran past its time limit.
    Timeout,
    /// The process running the step died (signal, memory limit).
    Crashed,
    /// The implementation does not support this backend.
    Unsupported,
    /// The configuration is not valid for this implementation.
    Invalid,
    /// Not run: an upstream step blocked it.
    Skipped,
    /// An agent answer held no code.
    NoCode,
    /// The model's endpoint refused this request for good (HTTP 400/413/422, e.g. a prompt over
    /// the context length): a cached outcome of its sample; the study goes on.
    ApiError,
    /// Interrupted (Ctrl-C) before it finished.
    Cancelled,
    /// The candidate could not be exported to a serialized program (it then runs sandboxed).
    NotExportable,
}

/// How an evaluated candidate is classed from its status (see `agent::accounting::Outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutcomeClass {
    Correct,
    CompileError,
    RuntimeError,
    Incorrect,
    /// Anything else: the evaluation itself did not conclude.
    EvalError,
}

/// A status name that is not in the vocabulary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown step status `{0}`")]
pub struct UnknownStatus(pub String);

impl StepStatus {
    /// Every status, in declaration order.
    pub const ALL: [StepStatus; 17] = [
        StepStatus::Ok,
        StepStatus::Correct,
        StepStatus::Failed,
        StepStatus::Error,
        StepStatus::CompileError,
        StepStatus::RuntimeError,
        StepStatus::Incorrect,
        StepStatus::Rejected,
        StepStatus::Timeout,
        StepStatus::Crashed,
        StepStatus::Unsupported,
        StepStatus::Invalid,
        StepStatus::Skipped,
        StepStatus::NoCode,
        StepStatus::ApiError,
        StepStatus::Cancelled,
        StepStatus::NotExportable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Ok => "ok",
            StepStatus::Correct => "correct",
            StepStatus::Failed => "failed",
            StepStatus::Error => "error",
            StepStatus::CompileError => "compile_error",
            StepStatus::RuntimeError => "runtime_error",
            StepStatus::Incorrect => "incorrect",
            StepStatus::Rejected => "rejected",
            StepStatus::Timeout => "timeout",
            StepStatus::Crashed => "crashed",
            StepStatus::Unsupported => "unsupported",
            StepStatus::Invalid => "invalid",
            StepStatus::Skipped => "skipped",
            StepStatus::NoCode => "no_code",
            StepStatus::ApiError => "api_error",
            StepStatus::Cancelled => "cancelled",
            StepStatus::NotExportable => "not_exportable",
        }
    }

    /// A name from a worker result or the run database; a name outside the vocabulary becomes
    /// `Error` (the harness produced something it does not understand).
    pub fn parse_lenient(s: &str) -> StepStatus {
        s.parse().unwrap_or(StepStatus::Error)
    }

    /// The step did its job (`ok`, or `correct` for a verification).
    pub fn is_success(self) -> bool {
        matches!(self, StepStatus::Ok | StepStatus::Correct)
    }

    /// Counts as a failed step (exit code 1).
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            StepStatus::Failed
                | StepStatus::Error
                | StepStatus::CompileError
                | StepStatus::RuntimeError
                | StepStatus::Incorrect
                | StepStatus::Rejected
                | StepStatus::Timeout
                | StepStatus::Crashed
        )
    }

    /// Stops the build unless `--keep-going` (a failure, or an interruption).
    pub fn stops_build(self) -> bool {
        self.is_failure() || self == StepStatus::Cancelled
    }

    /// Dependants do not run the same work after this: they inherit a status instead.
    pub fn blocks_dependants(self) -> bool {
        self.is_failure()
            || matches!(
                self,
                StepStatus::Unsupported
                    | StepStatus::Invalid
                    | StepStatus::Skipped
                    | StepStatus::NoCode
                    | StepStatus::ApiError
            )
    }

    /// The status a dependant gets when this status blocked it.
    pub fn inherited(self) -> StepStatus {
        match self {
            StepStatus::Unsupported => StepStatus::Unsupported,
            StepStatus::Invalid => StepStatus::Invalid,
            _ => StepStatus::Skipped,
        }
    }

    /// The outcome class of an evaluated candidate whose (worst) status is this: the one
    /// status -> outcome mapping (`agent::accounting` and `report::methods` use it).
    pub fn outcome_class(self) -> OutcomeClass {
        match self {
            StepStatus::Correct | StepStatus::Ok => OutcomeClass::Correct,
            StepStatus::CompileError | StepStatus::NoCode => OutcomeClass::CompileError,
            StepStatus::RuntimeError
            | StepStatus::Timeout
            | StepStatus::Crashed
            | StepStatus::Failed => OutcomeClass::RuntimeError,
            StepStatus::Incorrect | StepStatus::Rejected => OutcomeClass::Incorrect,
            StepStatus::Error
            | StepStatus::ApiError
            | StepStatus::Unsupported
            | StepStatus::Invalid
            | StepStatus::Skipped
            | StepStatus::Cancelled
            | StepStatus::NotExportable => OutcomeClass::EvalError,
        }
    }
}

impl FromStr for StepStatus {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        StepStatus::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownStatus(s.to_string()))
    }
}

impl fmt::Display for StepStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl AsRef<str> for StepStatus {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for StepStatus {
    fn from(s: &str) -> Self {
        StepStatus::parse_lenient(s)
    }
}

impl From<String> for StepStatus {
    fn from(s: String) -> Self {
        StepStatus::parse_lenient(&s)
    }
}

impl From<&String> for StepStatus {
    fn from(s: &String) -> Self {
        StepStatus::parse_lenient(s)
    }
}

impl From<StepStatus> for String {
    fn from(s: StepStatus) -> Self {
        s.as_str().to_string()
    }
}

// Comparisons with names keep string-typed callers compiling (`status == "ok"`).
impl PartialEq<str> for StepStatus {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for StepStatus {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for StepStatus {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

/// Statuses that count as a failed step (exit code 1). Unknown names are not failures.
pub fn is_failure(status: &str) -> bool {
    status
        .parse::<StepStatus>()
        .is_ok_and(StepStatus::is_failure)
}

/// Statuses after which dependants do not run the same work: they inherit a status instead.
pub fn blocks_dependants(status: &str) -> bool {
    status
        .parse::<StepStatus>()
        .is_ok_and(StepStatus::blocks_dependants)
}

/// The status a dependant gets when an upstream step blocked it.
pub fn inherited(status: &str) -> &'static str {
    StepStatus::parse_lenient(status).inherited().as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_str_and_serde() {
        for st in StepStatus::ALL {
            assert_eq!(st.as_str().parse::<StepStatus>(), Ok(st));
            assert_eq!(
                serde_json::to_value(st).unwrap(),
                serde_json::json!(st.as_str())
            );
            assert_eq!(st, st.as_str());
        }
        assert!("bogus".parse::<StepStatus>().is_err());
        assert_eq!(StepStatus::from("bogus"), StepStatus::Error);
    }

    #[test]
    fn questions() {
        assert!(StepStatus::Timeout.is_failure());
        assert!(!StepStatus::Cancelled.is_failure());
        assert!(StepStatus::Cancelled.stops_build());
        assert!(StepStatus::NoCode.blocks_dependants());
        assert!(StepStatus::ApiError.blocks_dependants() && !StepStatus::ApiError.stops_build());
        assert!(!StepStatus::NotExportable.blocks_dependants());
        assert_eq!(StepStatus::Invalid.inherited(), StepStatus::Invalid);
        assert_eq!(StepStatus::Crashed.inherited(), StepStatus::Skipped);
        assert_eq!(
            StepStatus::Rejected.outcome_class(),
            OutcomeClass::Incorrect
        );
        assert!(is_failure("crashed") && !is_failure("ok") && !is_failure("bogus"));
    }
}
