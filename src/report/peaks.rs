//! Device peaks: the published figures of known accelerators (from the one device table,
//! `crate::device`), and the measured peak of anything else (the CPU) from `jb doctor`.

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

/// The published peak of a device kind, from the device table (`crate::device`).
pub fn published(device_kind: &str) -> Option<Peak> {
    let d = crate::device::known_kind(device_kind)?;
    Some(Peak {
        device: d.short_name.to_string(),
        flops_per_s: d.bf16_tflops? * 1e12,
        bytes_per_s: d.hbm_gbps? * 1e9,
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
