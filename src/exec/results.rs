//! Typed worker results. Each names the fields jb reads; every other field is kept, as is, in
//! `extra` (so the worker may add fields without a Rust change; a named field that is null is
//! read as absent).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::outcome::StepStatus;

/// An implementation spec, as the worker's `impl` argument and results carry it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ImplSpec {
    /// The workload's own JAX reference.
    Xla,
    /// An untrusted candidate file.
    Candidate { path: String },
    /// A hand-tuned baseline with one configuration.
    Baseline {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        config: Option<Value>,
    },
    /// A candidate exported to serialized programs (a folder with `index.json`).
    Exported { path: String },
}

/// Fields every result has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Common {
    pub status: StepStatus,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_class: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The result of the worker's `compile` op.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompileResult {
    #[serde(flatten)]
    pub common: Common,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_pallas_call: Option<bool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The result of the worker's `verify` op.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifyResult {
    #[serde(flatten)]
    pub common: Common,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_abs_err: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rel_err: Option<f64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The result of the worker's `profile` op.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileResult {
    #[serde(flatten)]
    pub common: Common,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples_ms: Vec<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wall_samples_ms: Vec<f64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Read a typed result from a result value (`None` when it does not have the fields' types).
pub fn typed<T: for<'de> Deserialize<'de>>(result: &Value) -> Option<T> {
    serde_json::from_value(result.clone()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_survive_a_round_trip() {
        let v = json!({"status": "ok", "median_ms": 1.5, "samples_ms": [1.0, 2.0],
                       "timing": {"notes": []}, "speedup_vs_xla": {"point": 2.0}});
        let p: ProfileResult = typed(&v).unwrap();
        assert_eq!(p.common.status, StepStatus::Ok);
        assert_eq!(p.median_ms, Some(1.5));
        assert!(p.extra.contains_key("speedup_vs_xla"));
        assert_eq!(serde_json::to_value(&p).unwrap(), v);
    }

    #[test]
    fn impl_specs() {
        let c: ImplSpec =
            serde_json::from_value(json!({"kind": "candidate", "path": "k.py"})).unwrap();
        assert_eq!(
            c,
            ImplSpec::Candidate {
                path: "k.py".into()
            }
        );
        let x: ImplSpec = serde_json::from_value(json!({"kind": "xla"})).unwrap();
        assert_eq!(serde_json::to_value(x).unwrap(), json!({"kind": "xla"}));
        assert!(serde_json::from_value::<ImplSpec>(json!({"kind": "nope"})).is_err());
    }
}
