//! The typed, versioned messages that cross jb's process boundaries (Rust side).
//!
//! Three boundaries, each with a version both sides check; `python/jb/contract.py` holds the same
//! shapes and `tests/contract.rs` round-trips every message kind through both languages:
//! - [`worker`]: the Python worker protocol (stdio, one JSON object per line);
//! - [`ray`]: the Ray driver protocol (`jb.ray_driver`);
//! - [`export_index`]: `export/index.json`, written by the export stage, read by the judge.
//!
//! A message of another version, with a missing or mistyped field, an unknown field, or a step
//! status outside [`crate::outcome::StepStatus`] is a [`ContractError`] where it is decoded: one
//! clear error, never a silently wrong result. Payloads (a request's `args`, a result's fields
//! beyond its `status`) stay JSON objects owned by the ops.

pub mod export_index;
pub mod ray;
pub mod worker;

/// A message that does not fit its boundary's contract.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ContractError {
    #[error("{boundary}: malformed message: {message}")]
    Malformed {
        boundary: &'static str,
        message: String,
    },
    #[error("{boundary}: {field} {theirs} where jb speaks {ours}: jb's binary and its Python package come from different versions (rebuild jb, or run the jb that ships this python/ folder)")]
    Version {
        boundary: &'static str,
        field: &'static str,
        ours: u32,
        theirs: u32,
    },
    #[error("{boundary}: result status `{status}` is not a step status")]
    UnknownStatus {
        boundary: &'static str,
        status: String,
    },
}

/// Decode `value` as `T` (strictly: the types deny unknown fields), naming the boundary.
pub(crate) fn from_value<T: serde::de::DeserializeOwned>(
    boundary: &'static str,
    value: serde_json::Value,
) -> Result<T, ContractError> {
    serde_json::from_value(value).map_err(|e| ContractError::Malformed {
        boundary,
        message: e.to_string(),
    })
}

pub(crate) fn check_version(
    boundary: &'static str,
    field: &'static str,
    ours: u32,
    theirs: u32,
) -> Result<(), ContractError> {
    if ours == theirs {
        Ok(())
    } else {
        Err(ContractError::Version {
            boundary,
            field,
            ours,
            theirs,
        })
    }
}

/// One sample of every message kind, as `{"kind": ..., "message": ...}`: what the
/// cross-language test sends through Python and compares with what comes back.
pub fn samples() -> Vec<serde_json::Value> {
    let mut out = worker::samples();
    out.extend(ray::samples());
    out.extend(export_index::samples());
    out
}

/// Decode `message` as the type of `kind` and encode it again (the Rust half of the round trip).
pub fn roundtrip(kind: &str, message: serde_json::Value) -> Result<serde_json::Value, String> {
    fn again<T: serde::Serialize>(
        r: Result<T, ContractError>,
    ) -> Result<serde_json::Value, String> {
        r.map(|t| serde_json::to_value(t).expect("serializable"))
            .map_err(|e| e.to_string())
    }
    match kind {
        "worker_request" => again(worker::Request::decode(message)),
        "worker_ready" => again(worker::Ready::decode(message)),
        "worker_answer" => again(worker::Answer::decode(message)),
        "ray_request" => again(ray::Request::decode(message)),
        "ray_ready" => again(ray::Ready::decode(message)),
        "ray_start_error" => again(ray::StartError::decode(message)),
        "ray_reply" => again(ray::Reply::decode(message)),
        "export_index" => again(export_index::ExportIndex::decode(message)),
        other => Err(format!("unknown message kind {other:?}")),
    }
}
