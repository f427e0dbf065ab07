//! `jb list workloads`: every workload with its shapes and FLOPs at the chosen scale.

use std::time::Duration;

use serde_json::{json, Value};

use crate::error::{exit, JbError};
use crate::exec::python::PythonExecutor;
use crate::exec::CancelFlag;
use crate::pipeline::paths::match_pattern;

use super::GlobalOpts;
use crate::session::{self, worker_spec};

fn shapes(v: &Value) -> String {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|x| {
                    let shape = x
                        .get("shape")
                        .map(|s| {
                            s.to_string()
                                .replace(',', "x")
                                .trim_matches(['[', ']'])
                                .to_string()
                        })
                        .unwrap_or_default();
                    let dt = x.get("dtype").and_then(Value::as_str).unwrap_or("");
                    if shape.is_empty() {
                        format!("{dt}[]")
                    } else {
                        format!("{dt}[{shape}]")
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

pub fn list_workloads(global: &GlobalOpts) -> anyhow::Result<i32> {
    let project = session::project(&global.session())?;
    let env = session::worker_env(&global.session());
    let fp = session::fingerprint(&project, &global.session(), &env, true)?.unwrap_or_default();
    let backend = session::backend_of(&global.session(), &fp);
    let scale = session::scale_of(&global.session(), &backend);
    let py = PythonExecutor::new(worker_spec(&project, &env));
    let mut rows = Vec::new();
    for (path, vars) in match_pattern(&project.root, "workloads/{workload}/workload.py") {
        let folder = path.trim_end_matches("/workload.py").to_string();
        let out = py.call(
            "describe",
            json!({"workload": folder, "scale": scale}),
            false,
            Duration::from_secs(300),
            None,
            &CancelFlag::default(),
        );
        let mut r = out.result.clone();
        r["workload"] = json!(vars["workload"]);
        r["status"] = json!(out.status);
        rows.push(r);
    }
    py.close();
    if rows.is_empty() {
        return Err(
            JbError::Usage("no workloads found under workloads/*/workload.py".into()).into(),
        );
    }
    if global.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        println!("scale {scale}, backend {backend}");
        for r in &rows {
            let flops = r
                .get("flops")
                .and_then(Value::as_f64)
                .map(|f| format!("{:.3} GFLOP", f / 1e9))
                .unwrap_or_else(|| "-".into());
            let meta = r.get("meta").cloned().unwrap_or(Value::Null);
            println!(
                "{:55} {:11} {:12} in: {}  out: {}{}",
                r["workload"].as_str().unwrap_or(""),
                meta.get("category").and_then(Value::as_str).unwrap_or(""),
                flops,
                shapes(&r["inputs"]),
                shapes(&r["outputs"]),
                if meta.get("handtuned") == Some(&json!(true)) {
                    "  [hand-tuned]"
                } else {
                    ""
                }
            );
        }
    }
    Ok(exit::OK)
}
