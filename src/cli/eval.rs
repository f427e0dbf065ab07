//! `jb eval`: the command line of [`crate::eval::evaluate`]: parse the arguments, evaluate,
//! print the result (text, or the `--json` contract).

use std::path::PathBuf;

use clap::Args;
use serde_json::Value;

use crate::engine::progress;
use crate::error::{exit, JbError};
use crate::eval::{evaluate, EvalResult, EvalSettings, Timing};
use crate::project::absolute;

use super::GlobalOpts;

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The workload (folder name or id such as `12p`).
    #[arg(long, short = 'w')]
    pub workload: String,
    /// The candidate kernel: a Python file defining `workload(*inputs)`.
    #[arg(long, short = 'k')]
    pub kernel: PathBuf,
    /// Wall-clock limit per step in seconds (the candidate's worker is killed past it).
    #[arg(long, value_name = "SECONDS", default_value_t = 600.0)]
    pub timeout: f64,
    /// Memory limit of the candidate's worker in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 12000)]
    pub memory_mb: u64,
    /// Accept candidates without a `pallas_call` (pure-JAX rewrites).
    #[arg(long)]
    pub allow_pure_jax: bool,
    /// Measure again even when the measurement is cached (rounds pool with earlier ones).
    #[arg(long)]
    pub remeasure: bool,
    /// Replay an evaluation: the seed its inputs were drawn from (the `seed` of a verify
    /// result). Without it, every evaluation draws a secret seed from OS randomness.
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    /// Time budget of the paired measurement, in seconds. By default the rounds stop when every
    /// speedup's 95 % interval is within 2 % of it, or once they have cost what separate profile
    /// steps of the same programs would (at most 20 s). Given, the budget replaces that cost
    /// rule: the rounds go on until the intervals are within 2 % or SECONDS are spent (a
    /// narrower interval on a noisy machine, bought with time).
    #[arg(long, value_name = "SECONDS")]
    pub measure_budget: Option<f64>,
    /// Steps run at once (default: the CPU count). Steps that open an accelerator also hold a
    /// device each (one judge per device), and measurements never overlap on one device.
    #[arg(long, short = 'j', value_name = "N")]
    pub jobs: Option<usize>,
}

pub fn run(global: &GlobalOpts, args: EvalArgs) -> anyhow::Result<i32> {
    let settings = EvalSettings {
        timeout: args.timeout,
        memory_mb: args.memory_mb,
        allow_pure_jax: args.allow_pure_jax,
        remeasure: args.remeasure,
        measure_budget: args.measure_budget,
        handtuned: true,
        jobs: args.jobs.unwrap_or_else(super::build::default_jobs),
        seed: args.seed,
        progress: if global.json {
            progress::Mode::Quiet
        } else {
            progress::Mode::Lines
        },
    };
    if !absolute(&args.kernel).is_file() {
        return Err(
            JbError::Usage(format!("--kernel {}: no such file", args.kernel.display())).into(),
        );
    }
    let out = evaluate(&global.session(), &args.workload, &args.kernel, &settings)?;
    if global.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_text(&out);
    }
    Ok(if out.interrupted {
        exit::INTERNAL
    } else if out.is_correct() {
        exit::OK
    } else {
        exit::FAILED
    })
}

/// A value the worker produced, as JSON (`null` when absent).
fn shown(v: &Option<Value>) -> String {
    v.as_ref().unwrap_or(&Value::Null).to_string()
}

/// The result for a reader.
fn print_text(out: &EvalResult) {
    println!("{}: {}", out.workload, out.status);
    for r in &out.reasons {
        let text = r
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| r.to_string());
        // A traceback's tail runs over several lines: the later ones indented under the first.
        println!("  - {}", text.trim_end().replace('\n', "\n    "));
    }
    if let Some(t) = out.correctness.trials {
        println!(
            "  correctness: {t} trials, max abs err {}, max rel err {}",
            shown(&out.correctness.max_abs_err),
            shown(&out.correctness.max_rel_err)
        );
    }
    if let Some(v) = out
        .correctness
        .variants
        .as_ref()
        .filter(|v| v["status"] == "specialized" || v["status"] == "partly_specialized")
    {
        for s in v["specialized"].as_array().into_iter().flatten() {
            println!(
                "  variants: specialized at {}: {}",
                s["override"],
                s["reason"].as_str().unwrap_or("-")
            );
        }
    }
    let ms = |v: &Option<Timing>| {
        v.as_ref()
            .and_then(Timing::median_ms)
            .map(|m| format!("{m:.4} ms"))
            .unwrap_or_else(|| "-".into())
    };
    println!("  XLA baseline      {}", ms(&out.baseline));
    println!(
        "  hand-tuned ({})  {}",
        out.handtuned_config.map_or("none", |h| h.as_str()),
        ms(&out.handtuned)
    );
    println!("  candidate         {}", ms(&out.kernel));
    let ci = |v: &Option<[f64; 2]>| match v {
        Some([lo, hi]) => format!("  (95% CI {lo:.3}-{hi:.3})"),
        None => String::new(),
    };
    if let Some(why) = &out.unmeasured {
        println!("  speedup           none: {why}");
    }
    if let Some(s) = out.speedup_vs_xla {
        println!("  speedup vs XLA    {s:.3}x{}", ci(&out.speedup_ci));
    }
    if let Some(s) = out.speedup_vs_handtuned {
        println!(
            "  speedup vs hand-tuned {s:.3}x{}",
            ci(&out.speedup_vs_handtuned_ci)
        );
    }
    let slowed = &out.baseline_slowed_in_pair;
    for (g, name) in [
        (slowed.xla, "XLA"),
        (slowed.handtuned, "the hand-tuned kernel"),
    ] {
        if let Some(g) = g {
            println!(
                "  note: {name} ran {:.2}x slower beside the candidate than alone: speedup capped at {:.3}x (no interval)",
                g.ratio, g.capped
            );
        }
    }
    if let Some(m) = &out.measurement {
        if let Some(stop) = m.stop.as_ref().and_then(Value::as_str) {
            println!(
                "  paired measurement: {} rounds, stopped: {stop}",
                shown(&m.rounds)
            );
        }
    }
    if out.interpret == Some(Value::Bool(true)) {
        println!(
            "  note: Pallas ran in interpret mode on {}: times say nothing about accelerator speed",
            out.backend
        );
    }
}
