//! `jb doctor`: the environment fingerprint and the device's measured peaks.

use std::time::Duration;

use serde_json::{json, Value};

use crate::error::exit;
use crate::exec::python::PythonExecutor;
use crate::exec::CancelFlag;

use super::GlobalOpts;
use crate::session::doctor::{DoctorReport, PinsReport, SandboxReport};
use crate::session::{self, worker_spec};

#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Also check the measurement on this machine's device (python/jb/tools/device_check.py):
    /// XLA baselines of a handful of workloads (paper scale on an accelerator, `--scale` or tiny
    /// on CPU), the real profiler trace parsed, and paired speedups of portable candidates, as
    /// one table. Under 8 minutes on a GPU.
    #[arg(long)]
    pub device_check: bool,
}

/// Run the device check script in the project's Python environment; its exit code.
fn device_check(
    project: &crate::project::Project,
    global: &GlobalOpts,
    env: &[(String, String)],
) -> anyhow::Result<i32> {
    let spec = worker_spec(project, env);
    let mut cmd = std::process::Command::new(&spec.python);
    cmd.args(["-u", "-m", "jb.tools.device_check"])
        .current_dir(&spec.cwd)
        .env("PYTHONPATH", &spec.python_dir)
        .envs(spec.env.iter().map(|(k, v)| (k, v)));
    if let Some(s) = global.scale {
        cmd.args(["--scale", s.as_str()]);
    }
    if global.json {
        cmd.arg("--json");
    }
    let status = cmd
        .status()
        .map_err(|e| crate::error::JbError::io(&spec.python, e))?;
    Ok(status.code().unwrap_or(exit::INTERNAL))
}

pub fn run(global: &GlobalOpts, args: DoctorArgs) -> anyhow::Result<i32> {
    let project = session::project(&global.session())?;
    if let Some(cfg) = crate::session::ray::settings(&global.session(), &project)? {
        return super::doctor_ray::run(global, &project, cfg);
    }
    let env = session::worker_env(&global.session());
    let fp = session::fingerprint(&project, &global.session(), &env, true)?.unwrap_or_default();
    if args.device_check {
        return device_check(&project, global, &env);
    }
    let py = PythonExecutor::new(worker_spec(&project, &env));
    // Progress on stderr: the measurement takes seconds, and is never cached (measuring is the
    // point); the fingerprint above is (`<cache>/fingerprint.json`).
    let started = std::time::Instant::now();
    eprintln!(
        "measuring the device peak: XLA matmuls of a few sizes and a bandwidth reduction (seconds)..."
    );
    let peak = py.call(
        "peak",
        json!({}),
        false,
        Duration::from_secs(600),
        None,
        &CancelFlag::default(),
    );
    py.close();
    eprintln!(
        "  peak measured in {:.1} s; probing the sandbox...",
        started.elapsed().as_secs_f64()
    );
    let sandbox = SandboxReport::probe(&project);
    let variant = crate::pyenv::variant_for_backend(global.backend.map(|b| b.as_str()));
    let pins = PinsReport::of(&project, variant).unwrap_or(PinsReport {
        id: String::new(),
        python: String::new(),
        requirements: String::new(),
        fallback: false,
    });
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
        let report = DoctorReport {
            fingerprint: fp,
            peak: peak.result.clone(),
            pyenv: project.pyenv_dir.clone(),
            pins,
            cache_dir: project.cache_dir.clone(),
            sandbox,
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("project     {}", project.root.display());
        println!("cache       {}", project.cache_dir.display());
        println!("pyenv       {}", project.pyenv_dir.display());
        println!(
            "pins        {} (Python {}, {}){}",
            pins.id,
            pins.python,
            pins.requirements,
            if pins.fallback {
                "; FALLBACK: Python 3.11, so jax 0.10.2 (candidates written for jax 0.12 may not compile); install Python 3.12+ and run `jb setup`"
            } else {
                ""
            }
        );
        if sandbox.ok {
            println!(
                "sandbox     ok: {} (start-up {:.1} ms)",
                sandbox
                    .bwrap
                    .as_deref()
                    .map_or("bwrap".into(), |b| b.to_string_lossy()),
                sandbox.startup_ms.unwrap_or(0.0)
            );
            if let Some(l) = &sandbox.limits {
                let names = |v: &Value| -> String {
                    v.as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(Value::as_str)
                                .collect::<Vec<_>>()
                                .join(", ")
                        })
                        .unwrap_or_default()
                };
                println!(
                    "limits      enforced by the kernel: {} (memory {} MiB, pids {})",
                    names(&l["enforced"]),
                    l["memory_mb"],
                    l["pids_max"]
                );
                if let Some(m) = l["not_enforced"].as_object() {
                    for (k, why) in m {
                        println!(
                            "limits      NOT enforced: {k}: {}",
                            why.as_str().unwrap_or("?")
                        );
                    }
                }
            }
        } else {
            println!(
                "sandbox     UNAVAILABLE: {}; jb refuses to run candidate code unless --no-sandbox is given",
                sandbox.error.as_deref().unwrap_or("?")
            );
        }
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
