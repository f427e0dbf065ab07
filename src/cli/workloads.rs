//! `jb list workloads`: every workload with its shapes and FLOPs at the chosen scale.

use std::time::Duration;

use serde_json::{json, Value};

use crate::error::{exit, JbError};
use crate::exec::python::PythonExecutor;
use crate::exec::CancelFlag;
use crate::pipeline::paths::match_pattern;

use super::{describe_cache, GlobalOpts};
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
    let worker_hash = crate::engine::keys::worker_source_hash(&project.python_dir);
    let all = match_pattern(&project.root, "workloads/{workload}/workload.py");
    let started = std::time::Instant::now();
    let (mut cached, mut described) = (0usize, 0usize);
    let mut rows = Vec::new();
    for (i, (path, vars)) in all.iter().enumerate() {
        let folder = path.trim_end_matches("/workload.py").to_string();
        let key = describe_cache::key(&project.root, &folder, scale.as_str(), &fp, &worker_hash);
        let mut r = match describe_cache::get(&project.cache_dir, &key) {
            Some(r) => {
                cached += 1;
                r
            }
            None => {
                // Progress on stderr (stdout stays the listing, or the JSON).
                eprintln!("describing [{}/{}] {}", i + 1, all.len(), vars["workload"]);
                described += 1;
                let out = py.call(
                    "describe",
                    json!({"workload": folder, "scale": scale}),
                    false,
                    Duration::from_secs(300),
                    None,
                    &CancelFlag::default(),
                );
                let mut r = out.result.clone();
                r["status"] = json!(out.status);
                if json!(out.status) == json!("ok") {
                    describe_cache::put(&project.cache_dir, &key, &r);
                }
                r
            }
        };
        r["workload"] = json!(vars["workload"]);
        rows.push(r);
    }
    if described > 0 {
        eprintln!(
            "described {described} workload(s) in {:.1} s, {cached} from the cache ({})",
            started.elapsed().as_secs_f64(),
            project.cache_dir.join("describe").display()
        );
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
