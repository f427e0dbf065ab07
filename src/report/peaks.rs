//! Device peaks: the published figures of known accelerators, and the measured peak of anything
//! else (the CPU) from `jb doctor`.

use serde::Serialize;
use serde_json::Value;

/// The step id under which `jb doctor` records its peak measurement in the run database.
pub const PEAK_STEP: &str = "jb-doctor/peak";

/// The roofline of one device: peak FLOP/s and memory bandwidth.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Peak {
    pub device: String,
    pub flops_per_s: f64,
    pub bytes_per_s: f64,
    /// `published` (the table below) or `measured`.
    pub source: String,
    /// The record the measurement came from (measured peaks only).
    pub step: Option<String>,
    pub key: Option<String>,
}

impl Peak {
    /// Operational intensity (FLOP/byte) where the roofline turns from memory- to compute-bound.
    pub fn ridge(&self) -> f64 {
        self.flops_per_s / self.bytes_per_s
    }

    /// The attainable FLOP/s at an operational intensity.
    pub fn attainable(&self, intensity: f64) -> f64 {
        self.flops_per_s.min(intensity * self.bytes_per_s)
    }
}

/// Published dense bf16 peaks and HBM bandwidths. A device kind matches the first row one of
/// whose patterns it contains (lower case).
pub const PUBLISHED: &[(&str, &[&str], f64, f64)] = &[
    ("TPU v6e", &["v6 lite", "v6e", "trillium"], 918e12, 1640e9),
    ("TPU v5e", &["v5 lite", "v5e", "v5litepod"], 197e12, 819e9),
    ("TPU v5p", &["v5p", "tpu v5"], 459e12, 2765e9),
    ("NVIDIA H200", &["h200"], 989e12, 4800e9),
    ("NVIDIA H100", &["h100"], 989e12, 3350e9),
];

pub fn published(device_kind: &str) -> Option<Peak> {
    let kind = device_kind.to_lowercase();
    PUBLISHED
        .iter()
        .find(|(_, pats, _, _)| pats.iter().any(|p| kind.contains(p)))
        .map(|(name, _, f, b)| Peak {
            device: name.to_string(),
            flops_per_s: *f,
            bytes_per_s: *b,
            source: "published".into(),
            step: None,
            key: None,
        })
}

/// A peak from the result of the worker's `peak` op (`jb doctor`).
pub fn measured(result: &Value, step: Option<&str>, key: Option<&str>) -> Option<Peak> {
    let flops = result.get("flops_per_s").and_then(Value::as_f64)?;
    let bytes = result.get("bytes_per_s").and_then(Value::as_f64)?;
    (flops > 0.0 && bytes > 0.0).then(|| Peak {
        device: result
            .get("device_kind")
            .and_then(Value::as_str)
            .unwrap_or("unknown device")
            .to_string(),
        flops_per_s: flops,
        bytes_per_s: bytes,
        source: "measured".into(),
        step: step.map(str::to_string),
        key: key.map(str::to_string),
    })
}

/// Keep a peak measurement in the run database (step [`PEAK_STEP`], keyed by the environment),
/// so that reports and archives carry it like any other result.
pub fn record(
    cache: &crate::cache::Cache,
    fingerprint: &std::collections::BTreeMap<String, String>,
    result: &Value,
) -> crate::error::Result<crate::cache::ActionRecord> {
    let mut comps = crate::key::KeyComponents::new();
    comps.set("kind", "peak");
    for (k, v) in fingerprint {
        comps.set(format!("env:{k}"), v.clone());
    }
    let mut result = result.clone();
    if let Value::Object(m) = &mut result {
        m.remove("worker_pid");
        m.insert("status".into(), Value::String("ok".into()));
    }
    let files = std::collections::BTreeMap::new();
    let rec = crate::cache::ActionRecord {
        key: comps.key(),
        step_id: PEAK_STEP.into(),
        kind: "peak".into(),
        status: "ok".into(),
        output_digest: crate::key::output_digest(&result, &files),
        result,
        files,
        components: comps,
        created_at: crate::cache::db::now(),
        duration_ms: 0.0,
    };
    cache.db.put_action(&rec)?;
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_kinds_match_the_table() {
        assert_eq!(published("TPU v6 lite").unwrap().device, "TPU v6e");
        assert_eq!(published("TPU v5 lite").unwrap().device, "TPU v5e");
        assert_eq!(published("TPU v5").unwrap().device, "TPU v5p");
        assert_eq!(published("NVIDIA H200").unwrap().device, "NVIDIA H200");
        assert_eq!(
            published("NVIDIA H100 80GB HBM3").unwrap().device,
            "NVIDIA H100"
        );
        assert!(published("cpu").is_none());
        let p = published("TPU v6 lite").unwrap();
        assert!((p.ridge() - 559.756).abs() < 0.01);
    }
}
