//! The worker protocol: jb (Rust) and `python -u -m jb.worker` over stdio, one JSON object a line.
//!
//! `<- Ready`, then for each `-> Request` one `<- Answer` with its id. A worker speaking another
//! [`PROTOCOL`] is refused at its first line; an answer whose result status is not a
//! [`StepStatus`] is an error at the boundary.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::{check_version, from_value, ContractError};
use crate::outcome::StepStatus;

/// The version of this protocol (`WORKER_PROTOCOL` in `python/jb/contract.py`).
pub const PROTOCOL: u32 = 2;
const BOUNDARY: &str = "worker protocol";

/// jb -> worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    pub id: u64,
    pub op: String,
    pub args: Value,
    pub protocol: u32,
}

impl Request {
    pub fn new(id: u64, op: &str, args: Value) -> Request {
        Request {
            id,
            op: op.to_string(),
            args,
            protocol: PROTOCOL,
        }
    }

    /// The request as one protocol line (no newline).
    pub fn line(&self) -> String {
        serde_json::to_string(self).expect("a request serializes")
    }

    pub fn decode(v: Value) -> Result<Request, ContractError> {
        let r: Request = from_value(BOUNDARY, v)?;
        check_version(BOUNDARY, "protocol", PROTOCOL, r.protocol)?;
        Ok(r)
    }
}

/// The worker's first line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ready {
    pub event: String,
    pub pid: u32,
    pub python: String,
    pub jax: String,
    pub backend: String,
    pub protocol: u32,
}

impl Ready {
    pub fn decode(v: Value) -> Result<Ready, ContractError> {
        let r: Ready = from_value(BOUNDARY, v)?;
        if r.event != "ready" {
            return Err(ContractError::Malformed {
                boundary: BOUNDARY,
                message: format!("a ready line has event `ready`, not `{}`", r.event),
            });
        }
        check_version(BOUNDARY, "protocol", PROTOCOL, r.protocol)?;
        Ok(r)
    }
}

/// A harness failure inside the worker (an exception escaping an op).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerError {
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
    pub traceback: String,
}

/// worker -> jb: the answer to one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    pub id: Option<u64>,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<WorkerError>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_ms: Option<f64>,
}

/// What an answer means for the step.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The op ran: its result, with the status it reports (`ok` when it names none).
    Result {
        status: StepStatus,
        result: Map<String, Value>,
    },
    /// An exception escaped the op: a harness error.
    HarnessError(WorkerError),
}

impl Answer {
    pub fn decode(v: Value) -> Result<Answer, ContractError> {
        let a: Answer = from_value(BOUNDARY, v)?;
        a.outcome()?;
        Ok(a)
    }

    /// The step status this answer reports, checked against the vocabulary.
    pub fn outcome(&self) -> Result<Outcome, ContractError> {
        match (self.ok, &self.result, &self.error) {
            (true, Some(result), None) => {
                let name = match result.get("status") {
                    None => "ok",
                    Some(Value::String(s)) => s.as_str(),
                    Some(other) => {
                        return Err(ContractError::Malformed {
                            boundary: BOUNDARY,
                            message: format!("result status must be a string, got {other}"),
                        })
                    }
                };
                let status =
                    name.parse::<StepStatus>()
                        .map_err(|_| ContractError::UnknownStatus {
                            boundary: BOUNDARY,
                            status: name.to_string(),
                        })?;
                Ok(Outcome::Result {
                    status,
                    result: result.clone(),
                })
            }
            (false, None, Some(e)) => Ok(Outcome::HarnessError(e.clone())),
            _ => Err(ContractError::Malformed {
                boundary: BOUNDARY,
                message: "an answer has a result when ok, else an error".into(),
            }),
        }
    }
}

/// A protocol line from the worker: its first line, or an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Ready(Ready),
    Answer(Answer),
}

impl Message {
    /// Decode one line: `None` when it is not JSON at all (output that escaped onto the pipe).
    pub fn decode_line(line: &str) -> Option<Result<Message, ContractError>> {
        let v: Value = serde_json::from_str(line).ok()?;
        Some(if v.get("event").is_some() {
            Ready::decode(v).map(Message::Ready)
        } else {
            Answer::decode(v).map(Message::Answer)
        })
    }
}

pub(super) fn samples() -> Vec<Value> {
    let mut ok = Map::new();
    ok.insert("status".into(), json!("correct"));
    ok.insert("trials".into(), json!(8));
    vec![
        json!({"kind": "worker_request", "message": Request::new(7, "verify", json!({"impl": {"kind": "ref"}}))}),
        json!({"kind": "worker_ready", "message": Ready {
            event: "ready".into(), pid: 41, python: "3.13.1".into(), jax: "0.12.0.1".into(),
            backend: "cpu".into(), protocol: PROTOCOL }}),
        json!({"kind": "worker_answer", "message": Answer {
            id: Some(7), ok: true, result: Some(ok), error: None, elapsed_ms: Some(12.5) }}),
        json!({"kind": "worker_answer", "message": Answer {
            id: Some(8), ok: false, result: None, elapsed_ms: Some(0.5),
            error: Some(WorkerError { kind: "KeyError".into(), message: "'x'".into(), traceback: "Traceback ...".into() }) }}),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_protocol_version_is_refused_with_both_versions_named() {
        let e = Ready::decode(
            json!({"event": "ready", "pid": 1, "python": "3.13", "jax": "0.12",
            "backend": "cpu", "protocol": 1}),
        )
        .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("protocol 1") && msg.contains("speaks 2"),
            "{msg}"
        );
    }

    #[test]
    fn an_unknown_status_is_an_error_at_the_boundary() {
        let e = Answer::decode(json!({"id": 3, "ok": true, "result": {"status": "api_eror"}}))
            .unwrap_err();
        assert!(matches!(e, ContractError::UnknownStatus { .. }), "{e}");
        let a = Answer::decode(json!({"id": 3, "ok": true, "result": {"status": "api_error"}}))
            .unwrap();
        assert!(matches!(
            a.outcome().unwrap(),
            Outcome::Result {
                status: StepStatus::ApiError,
                ..
            }
        ));
    }

    #[test]
    fn unknown_fields_and_contradictory_answers_are_malformed() {
        assert!(Answer::decode(json!({"id": 3, "ok": true, "result": {}, "extra": 1})).is_err());
        assert!(Answer::decode(json!({"id": 3, "ok": true})).is_err());
        assert!(Answer::decode(json!({"id": 3, "ok": false, "result": {}})).is_err());
        assert_eq!(
            Message::decode_line("plain text the candidate printed"),
            None
        );
    }
}
