//! `jb doctor`: the environment fingerprint and the device's measured peaks.

use std::time::Duration;

use serde_json::{json, Value};

use crate::error::exit;
use crate::exec::python::PythonExecutor;
use crate::exec::CancelFlag;

use super::session::{self, worker_spec};
use super::GlobalOpts;

pub fn run(global: &GlobalOpts) -> anyhow::Result<i32> {
    let project = session::project(global)?;
    if let Some(cfg) = super::ray_session::settings(global, &project)? {
        return super::doctor_ray::run(global, &project, cfg);
    }
    let env = session::worker_env(global);
    let fp = session::fingerprint(&project, global, &env, true)?.unwrap_or_default();
    let py = PythonExecutor::new(worker_spec(&project, &env));
    let peak = py.call(
        "peak",
        json!({}),
        false,
        Duration::from_secs(600),
        None,
        &CancelFlag::default(),
    );
    py.close();
    if !peak.infra {
        let _ = std::fs::write(
            project.cache_dir.join("peak.json"),
            serde_json::to_string_pretty(&peak.result)?,
        );
        // Also a record of the run database: reports and archives cite it by key.
        if let Err(e) = crate::cache::Cache::open(&project.cache_dir)
            .and_then(|c| crate::report::peaks::record(&c, &fp, &peak.result))
        {
            eprintln!("warning: could not record the peak in the run database: {e}");
        }
    }
    if global.json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"fingerprint": fp, "peak": peak.result, "pyenv": project.pyenv_dir, "cache_dir": project.cache_dir})
            )?
        );
    } else {
        println!("project     {}", project.root.display());
        println!("cache       {}", project.cache_dir.display());
        println!("pyenv       {}", project.pyenv_dir.display());
        for (k, v) in &fp {
            println!("{k:11} {v}");
        }
        if let Value::Object(m) = &peak.result {
            for (k, v) in m {
                if k != "worker_pid" {
                    println!("{k:11} {v}");
                }
            }
        }
    }
    Ok(if peak.infra { exit::INTERNAL } else { exit::OK })
}
