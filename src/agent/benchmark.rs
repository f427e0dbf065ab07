//! What the prompt says about a workload: the benchmark line (from the worker's `describe` at
//! the session's scale, cached under `<cache>/agent/describe/`) and the reference source.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use super::prompt::Benchmark;
use crate::error::{JbError, Result};
use crate::exec::python::PythonExecutor;
use crate::exec::CancelFlag;

fn shapes(v: &Value) -> String {
    let items: Vec<String> = v
        .as_array()
        .into_iter()
        .flatten()
        .map(|x| {
            let dims: Vec<String> = x["shape"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| d.to_string())
                .collect();
            format!(
                "{}[{}]",
                x["dtype"].as_str().unwrap_or("?"),
                dims.join(", ")
            )
        })
        .collect();
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

fn compact(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v}")).collect();
            parts.join(", ")
        }
        other => other.to_string(),
    }
}

/// The benchmark line from a `describe` result.
pub fn line(workload: &str, d: &Value) -> String {
    let meta = &d["meta"];
    let mut s = workload.to_string();
    let what: Vec<String> = [
        meta["operator"].as_str().map(|o| o.replace('_', " ")),
        meta["model"].as_str().map(|m| format!("from {m}")),
        meta["category"].as_str().map(|c| format!("({c} workload)")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !what.is_empty() {
        s.push_str(": ");
        s.push_str(&what.join(" "));
    }
    s.push('.');
    if let Some(scale) = d["scale"].as_str() {
        s.push_str(&format!(" Scale `{scale}`"));
    }
    if d["config"].is_object() {
        s.push_str(&format!(", CONFIG {{{}}}", compact(&d["config"])));
    }
    s.push_str(&format!(
        ". Inputs: {}. Outputs: {}.",
        shapes(&d["inputs"]),
        shapes(&d["outputs"])
    ));
    if let Some(f) = d["flops"].as_f64() {
        s.push_str(&format!(" {f:.3e} FLOP per call."));
    }
    if let (Some(a), Some(r)) = (
        d["tolerance"]["atol"].as_f64(),
        d["tolerance"]["rtol"].as_f64(),
    ) {
        s.push_str(&format!(
            " Correct means allclose against the reference with atol={a}, rtol={r} (compared in float32)."
        ));
    }
    if let Some(st) = d["static_argnums"].as_array().filter(|a| !a.is_empty()) {
        s.push_str(&format!(
            " Inputs at positions {} are Python values (static), not arrays.",
            Value::Array(st.clone())
        ));
    }
    s
}

/// The benchmark of a workload: `describe` (cached by the workload's source, the scale and the
/// worker's source hash) and the workload file as the reference.
pub fn load(
    root: &Path,
    cache_dir: &Path,
    workload: &str,
    scale: &str,
    worker_hash: &str,
    py: &PythonExecutor,
) -> Result<Benchmark> {
    let file = root.join("workloads").join(workload).join("workload.py");
    let reference = std::fs::read_to_string(&file).map_err(|e| JbError::io(&file, e))?;
    let mut h = blake3::Hasher::new();
    for part in [reference.as_str(), scale, worker_hash] {
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    let dir = cache_dir.join("agent").join("describe");
    let cached = dir.join(format!("{}.json", h.finalize().to_hex()));
    let d: Value = match std::fs::read_to_string(&cached)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
    {
        Some(v) => v,
        None => {
            let out = py.call(
                "describe",
                json!({"workload": format!("workloads/{workload}"), "scale": scale}),
                false,
                Duration::from_secs(600),
                None,
                &CancelFlag::default(),
            );
            if out.status != "ok" {
                return Err(JbError::Worker(format!(
                    "describe {workload}: {} {}",
                    out.status, out.result
                )));
            }
            std::fs::create_dir_all(&dir).map_err(|e| JbError::io(&dir, e))?;
            let tmp = dir.join(format!(".{}.tmp", std::process::id()));
            std::fs::write(&tmp, out.result.to_string()).map_err(|e| JbError::io(&tmp, e))?;
            std::fs::rename(&tmp, &cached).map_err(|e| JbError::io(&cached, e))?;
            out.result
        }
    };
    Ok(Benchmark {
        workload: workload.to_string(),
        line: line(workload, &d),
        reference,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn benchmark_line() {
        let d = json!({
            "scale": "tiny",
            "config": {"batch": 2, "epsilon": 1e-5},
            "meta": {"category": "priority", "model": "Llama-3.1-70B", "operator": "rms_norm"},
            "inputs": [{"shape": [2, 16, 256], "dtype": "bfloat16"}, {"shape": [256], "dtype": "bfloat16"}],
            "outputs": [{"shape": [2, 16, 256], "dtype": "bfloat16"}],
            "flops": 40960.0,
            "tolerance": {"atol": 0.01, "rtol": 0.01},
            "static_argnums": [],
        });
        let l = line("12p_RMSNorm", &d);
        assert_eq!(
            l,
            "12p_RMSNorm: rms norm from Llama-3.1-70B (priority workload). Scale `tiny`, CONFIG {batch=2, epsilon=0.00001}. \
             Inputs: bfloat16[2, 16, 256], bfloat16[256]. Outputs: bfloat16[2, 16, 256]. 4.096e4 FLOP per call. \
             Correct means allclose against the reference with atol=0.01, rtol=0.01 (compared in float32)."
        );
        let d = json!({"inputs": [], "outputs": [], "static_argnums": [3]});
        assert!(line("11p", &d).contains("positions [3] are Python values"));
    }
}
