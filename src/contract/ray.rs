//! The Ray driver protocol: jb (Rust) and `python -u -m jb.ray_driver` over stdio.
//!
//! `<- Ready` (or `<- StartError` when it cannot connect), then for each `-> Request` one
//! `<- Reply` with its id, in completion order. The payload of a `worker` or `sandboxed` reply
//! holds the node's worker [`super::worker::Answer`] under `response`.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::{check_version, from_value, ContractError};

/// The version of this protocol (`RAY_PROTOCOL` in `python/jb/contract.py`).
pub const PROTOCOL: u32 = 1;
const BOUNDARY: &str = "Ray driver protocol";

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

    pub fn line(&self) -> String {
        serde_json::to_string(self).expect("a request serializes")
    }

    pub fn decode(v: Value) -> Result<Request, ContractError> {
        let r: Request = from_value(BOUNDARY, v)?;
        check_version(BOUNDARY, "protocol", PROTOCOL, r.protocol)?;
        Ok(r)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ready {
    pub event: String,
    pub pid: u32,
    pub ray: String,
    pub resources: Map<String, Value>,
    pub nodes: u64,
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

/// The driver's first line when it cannot serve (an unreachable cluster, no Ray installed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartError {
    pub event: String,
    pub message: String,
}

impl StartError {
    pub fn decode(v: Value) -> Result<StartError, ContractError> {
        let r: StartError = from_value(BOUNDARY, v)?;
        if r.event != "error" {
            return Err(ContractError::Malformed {
                boundary: BOUNDARY,
                message: format!("a start error has event `error`, not `{}`", r.event),
            });
        }
        Ok(r)
    }
}

/// The driver's first line: ready, or why not.
#[derive(Debug, Clone, PartialEq)]
pub enum Start {
    Ready(Ready),
    Failed(StartError),
}

impl Start {
    pub fn decode(v: Value) -> Result<Start, ContractError> {
        match v.get("event").and_then(Value::as_str) {
            Some("error") => StartError::decode(v).map(Start::Failed),
            _ => Ready::decode(v).map(Start::Ready),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    pub id: Option<u64>,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceback: Option<String>,
}

impl Reply {
    pub fn decode(v: Value) -> Result<Reply, ContractError> {
        let r: Reply = from_value(BOUNDARY, v)?;
        if r.ok != r.result.is_some() || r.ok == r.error.is_some() {
            return Err(ContractError::Malformed {
                boundary: BOUNDARY,
                message: "a reply has a result when ok, else an error".into(),
            });
        }
        Ok(r)
    }

    /// The result, or the driver's error message.
    pub fn into_result(self) -> Result<Value, String> {
        if self.ok {
            Ok(self.result.unwrap_or(Value::Null))
        } else {
            Err(self.error.unwrap_or_else(|| "unknown error".into()))
        }
    }
}

pub(super) fn samples() -> Vec<Value> {
    let mut resources = Map::new();
    resources.insert("CPU".into(), json!(4.0));
    vec![
        json!({"kind": "ray_request", "message": Request::new(3, "worker", json!({"op": "compile"}))}),
        json!({"kind": "ray_ready", "message": Ready {
            event: "ready".into(), pid: 99, ray: "2.40.0".into(), resources, nodes: 2, protocol: PROTOCOL }}),
        json!({"kind": "ray_start_error", "message": StartError {
            event: "error".into(), message: "cannot reach the Ray cluster".into() }}),
        json!({"kind": "ray_reply", "message": Reply {
            id: Some(3), ok: true, result: Some(json!({"response": {}})), error: None, traceback: None }}),
        json!({"kind": "ray_reply", "message": Reply {
            id: Some(4), ok: false, result: None, error: Some("ValueError: bad".into()),
            traceback: Some("Traceback ...".into()) }}),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_driver_of_another_version_is_refused() {
        let e = Start::decode(
            json!({"event": "ready", "pid": 1, "ray": "2", "resources": {},
            "nodes": 1, "protocol": 0}),
        )
        .unwrap_err();
        assert!(matches!(e, ContractError::Version { theirs: 0, .. }), "{e}");
        assert!(matches!(
            Start::decode(json!({"event": "error", "message": "no"})).unwrap(),
            Start::Failed(_)
        ));
    }
}
