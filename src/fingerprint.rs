//! The environment fingerprint (versions, backend, devices), cached so that a no-op build
//! starts no Python process.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{JbError, Result};
use crate::exec::python::PythonExecutor;
use crate::exec::CancelFlag;

/// Environment variables that change what JAX sees.
pub const ENV_VARS: &[&str] = &[
    "JAX_PLATFORMS",
    "XLA_FLAGS",
    "CUDA_VISIBLE_DEVICES",
    "TPU_VISIBLE_CHIPS",
    "JAX_ENABLE_X64",
];

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Stored {
    probe: BTreeMap<String, String>,
    fingerprint: BTreeMap<String, String>,
}

/// What the cached fingerprint is valid for.
pub fn probe(pins: &str, worker_env: &[(String, String)]) -> BTreeMap<String, String> {
    let mut p = BTreeMap::new();
    p.insert("pins".to_string(), pins.to_string());
    for v in ENV_VARS {
        let from_spec = worker_env
            .iter()
            .find(|(k, _)| k == v)
            .map(|(_, x)| x.clone());
        p.insert(
            v.to_string(),
            from_spec
                .or_else(|| std::env::var(v).ok())
                .unwrap_or_default(),
        );
    }
    p
}

pub fn cached(
    cache_dir: &Path,
    probe: &BTreeMap<String, String>,
) -> Option<BTreeMap<String, String>> {
    cached_at(&cache_dir.join("fingerprint.json"), probe)
}

/// The fingerprint stored in `path` if it was measured for `probe`.
pub fn cached_at(
    path: &Path,
    probe: &BTreeMap<String, String>,
) -> Option<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).ok()?;
    let s: Stored = serde_json::from_str(&text).ok()?;
    (s.probe == *probe).then_some(s.fingerprint)
}

/// Store a fingerprint measured for `probe` in `path` (atomically).
pub fn store_at(
    path: &Path,
    probe: &BTreeMap<String, String>,
    fingerprint: &BTreeMap<String, String>,
) -> Result<()> {
    let stored = Stored {
        probe: probe.clone(),
        fingerprint: fingerprint.clone(),
    };
    let tmp = path.with_extension("json.tmp");
    std::fs::write(
        &tmp,
        serde_json::to_string_pretty(&stored).unwrap_or_default(),
    )
    .map_err(|e| JbError::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| JbError::io(path, e))
}

/// Ask a worker for the fingerprint and cache it.
pub fn measure(
    cache_dir: &Path,
    probe: &BTreeMap<String, String>,
    py: &PythonExecutor,
) -> Result<BTreeMap<String, String>> {
    let out = py.call(
        "fingerprint",
        serde_json::json!({}),
        false,
        Duration::from_secs(300),
        None,
        &CancelFlag::default(),
    );
    if out.infra {
        return Err(JbError::PythonEnv(format!("fingerprint: {}", out.result)));
    }
    let mut fp = BTreeMap::new();
    if let Value::Object(m) = &out.result {
        for (k, v) in m {
            if matches!(k.as_str(), "status" | "worker_pid" | "duration_ms") {
                continue;
            }
            fp.insert(
                k.clone(),
                match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                },
            );
        }
    }
    store_at(&cache_dir.join("fingerprint.json"), probe, &fp)?;
    Ok(fp)
}
