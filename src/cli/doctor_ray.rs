//! `jb doctor --executor ray`: the cluster's nodes, their resources and the judges' fingerprint.

use serde_json::Value;

use crate::error::{exit, JbError};
use crate::exec::ray::RayConfig;
use crate::project::Project;

use super::GlobalOpts;
use crate::session::doctor::RayDoctorReport;
use crate::session::{self, ray as ray_session};

pub fn run(global: &GlobalOpts, project: &Project, cfg: RayConfig) -> anyhow::Result<i32> {
    ray_session::ensure_env(&global.session(), project)?;
    let env = session::worker_env(&global.session());
    let address = cfg.address.clone();
    let ray = ray_session::executor(&global.session(), project, cfg, &env);
    let nodes = ray.nodes().map_err(|e| JbError::Cluster(e.to_string()))?;
    let fp =
        ray_session::fingerprint(&global.session(), project, &env, &ray, true)?.unwrap_or_default();
    if global.json {
        let report = RayDoctorReport {
            executor: "ray",
            address,
            cluster: nodes,
            fingerprint: fp,
            pyenv: project.pyenv_dir.clone(),
            cache_dir: project.cache_dir.clone(),
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(exit::OK);
    }
    println!("executor    ray ({address})");
    println!("project     {}", project.root.display());
    println!("cache       {}", project.cache_dir.display());
    let empty = Vec::new();
    let list = nodes
        .get("nodes")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    println!("nodes       {}", list.len());
    for n in list {
        let alive = n.get("alive").and_then(Value::as_bool) == Some(true);
        let resources = n
            .get("resources")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| !k.starts_with("node:") && !k.contains("memory"))
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        println!(
            "  {} {:15} {:5} {resources}",
            n.get("node_id")
                .and_then(Value::as_str)
                .map(|s| &s[..s.len().min(12)])
                .unwrap_or("?"),
            n.get("address").and_then(Value::as_str).unwrap_or("?"),
            if alive { "alive" } else { "dead" },
        );
    }
    println!(
        "total       {}",
        nodes.get("total").cloned().unwrap_or_default()
    );
    println!(
        "available   {}",
        nodes.get("available").cloned().unwrap_or_default()
    );
    println!(
        "judges on   {}",
        nodes.get("device_resource").cloned().unwrap_or_default()
    );
    for (k, v) in &fp {
        println!("{k:11} {v}");
    }
    Ok(exit::OK)
}
