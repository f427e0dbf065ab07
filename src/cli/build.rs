//! `jb build`.

use std::io::IsTerminal;

use clap::Args;

use crate::engine::{closure_in_order, progress, BuildOptions};
use crate::error::exit;
use crate::graph;

use super::GlobalOpts;
use crate::session::{Python, Session};

#[derive(Debug, Args)]
pub struct BuildArgs {
    /// What to build: `all` (default), a pipeline, `pipeline/step`, a step id, a workload (`12p`) or a glob.
    pub targets: Vec<String>,
    /// Only the steps of this pipeline.
    #[arg(long, short = 'p')]
    pub pipeline: Option<String>,
    /// Steps run at once (measurements still never overlap on one device). Default: the number
    /// of CPUs here; with `--executor ray`, 64 (the cluster schedules them).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Go on with independent steps after a failure.
    #[arg(long, short = 'k')]
    pub keep_going: bool,
    /// Print the plan (what would run and why); run nothing.
    #[arg(long, short = 'n')]
    pub dry_run: bool,
    /// Measure again even when measurements are cached (samples accumulate under the same key).
    #[arg(long)]
    pub remeasure: bool,
    /// Per-step wall-clock limit in seconds (overrides the pipelines' `timeout`).
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
}

pub(crate) fn default_jobs() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
}

/// The steps named by `targets`, restricted to `pipeline` when one is given.
pub fn select_in_pipeline(
    set: &crate::pipeline::PipelineSet,
    targets: &[String],
    pipeline: Option<&str>,
) -> crate::error::Result<Vec<usize>> {
    let Some(p) = pipeline else {
        return graph::select(set, targets);
    };
    if !set.pipelines.iter().any(|x| x.name == p) {
        return Err(crate::error::JbError::Usage(format!(
            "--pipeline {p}: no such pipeline (see `jb list pipelines`)"
        )));
    }
    let targets: Vec<String> = if targets.is_empty() || targets == ["all"] {
        vec![p.to_string()]
    } else {
        targets.to_vec()
    };
    let mut selected = graph::select_in(set, &targets, Some(p))?;
    selected.retain(|&i| set.steps[i].pipeline == p);
    if selected.is_empty() {
        return Err(crate::error::JbError::Usage(format!(
            "targets {} match no step of pipeline `{p}`",
            targets.join(" ")
        )));
    }
    Ok(selected)
}

pub fn run(global: &GlobalOpts, args: BuildArgs) -> anyhow::Result<i32> {
    let session = Session::open(&global.session(), Python::IfNeeded)?;
    let selected = select_in_pipeline(&session.set, &args.targets, args.pipeline.as_deref())?;
    let order = closure_in_order(&session.set, &selected);
    let engine = session.engine()?;
    if args.dry_run {
        let plan = engine.plan(&session.set, &order, args.remeasure)?;
        if global.json {
            println!("{}", serde_json::to_string_pretty(&plan)?);
        } else {
            let runs = plan.iter().filter(|p| p.action == "run").count();
            for p in &plan {
                println!("{:6} {}  ({})", p.action, p.step, p.reason);
            }
            println!(
                "{} of {} steps would run (scale {}, backend {})",
                runs,
                plan.len(),
                session.scale,
                session.backend
            );
        }
        return Ok(exit::OK);
    }
    let mode = if global.json {
        progress::Mode::Quiet
    } else if std::io::stderr().is_terminal() {
        progress::Mode::Bar
    } else {
        progress::Mode::Lines
    };
    // On a cluster, Ray places steps on devices (one judge per device); here they only queue.
    let on_cluster = session.ray.is_some();
    let opts = BuildOptions {
        jobs: args
            .jobs
            .unwrap_or(if on_cluster { 64 } else { default_jobs() })
            .max(1),
        keep_going: args.keep_going,
        remeasure: args.remeasure,
        timeout: args.timeout,
        exclusive_measurements: session.backend == "cpu" && !on_cluster,
        devices: session.device_units().0,
        device_bound: session.device_units().1,
        progress: mode,
        command: std::env::args().collect::<Vec<_>>().join(" "),
    };
    let summary = engine.build(&session.set, &order, &opts)?;
    if let Some(e) = session.cluster_failure() {
        return Err(e.into());
    }
    if global.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        let failed: Vec<_> = summary
            .steps
            .iter()
            .filter(|s| s.status.is_failure())
            .collect();
        for f in &failed {
            eprint!("{}", failed_line(&f.step, f.status.as_str(), &f.result));
        }
        eprintln!(
            "jb: {} steps: {} ran, {} cached, {} failed{} in {:.2} s (run {})",
            summary.steps.len(),
            summary.ran,
            summary.cached,
            summary.failed,
            if summary.interrupted {
                ", interrupted"
            } else {
                ""
            },
            summary.wall_ms / 1e3,
            summary.run_id
        );
    }
    Ok(if summary.interrupted {
        exit::INTERNAL
    } else if summary.failed > 0 {
        exit::FAILED
    } else {
        exit::OK
    })
}

/// A failed step for the reader: `FAILED <step>: <status> <first reason>`, then its error (the
/// traceback's tail a compile error carries), indented.
pub fn failed_line(step: &str, status: &str, result: &serde_json::Value) -> String {
    let why = result
        .get("reasons")
        .and_then(|r| r.get(0))
        .and_then(|r| r.as_str())
        .unwrap_or("");
    let mut out = format!("FAILED {step}: {status}");
    if let Some(class) = result.get("error_class").and_then(|c| c.as_str()) {
        out.push_str(&format!(" ({class})"));
    }
    if !why.is_empty() {
        out.push(' ');
        out.push_str(why);
    }
    out.push('\n');
    if let Some(e) = result
        .get("error")
        .and_then(|e| e.as_str())
        .filter(|e| !e.trim().is_empty() && *e != why)
    {
        for line in e.trim_end().lines() {
            out.push_str("    ");
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::failed_line;
    use serde_json::json;

    #[test]
    fn a_failed_line_carries_the_error() {
        let r = json!({"error_class": "import", "reasons": [],
                       "error": "File \"k.py\", line 3\nSyntaxError: invalid syntax"});
        assert_eq!(
            failed_line("jb-eval/export[workload=w]", "compile_error", &r),
            "FAILED jb-eval/export[workload=w]: compile_error (import)\n    File \"k.py\", line 3\n    SyntaxError: invalid syntax\n"
        );
        let r = json!({"reasons": ["trial 1: off"]});
        assert_eq!(
            failed_line("s", "incorrect", &r),
            "FAILED s: incorrect trial 1: off\n"
        );
    }
}
