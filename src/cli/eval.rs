//! `jb eval`: the command line of [`crate::eval::evaluate`]: parse the arguments, evaluate,
//! print the result (text, or the `--json` contract).

use std::path::PathBuf;

use clap::Args;

use crate::engine::progress;
use crate::error::{exit, JbError};
use crate::eval::{evaluate, EvalSettings};
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
        let trace = super::eval_text::trace_of(&global.session(), &out);
        print!("{}", super::eval_text::render(&out, trace.as_deref()));
    }
    Ok(if out.interrupted {
        exit::INTERNAL
    } else if out.is_correct() {
        exit::OK
    } else {
        exit::FAILED
    })
}
