//! `jb eval`: compile, verify and profile one candidate kernel beside the XLA baseline and the
//! hand-tuned baseline, as one incremental build.

use std::path::PathBuf;

use clap::Args;
use serde_json::{json, Value};

use crate::engine::{closure_in_order, progress, BuildOptions, StepReport};
use crate::error::{exit, JbError};
use crate::pipeline::{parse_pipeline, space::load_space};
use crate::project::{absolute, Project};

use super::session::{Python, Session};
use super::{resolve, GlobalOpts};

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
    /// Measure again even when the measurement is cached.
    #[arg(long)]
    pub remeasure: bool,
}

const EVAL: &str = "jb-eval";

/// The hand-tuned configuration: the tuned one if `jb tune` found one, else the defaults.
fn handtuned_config(
    project: &Project,
    cache: &crate::cache::Cache,
    workload: &str,
) -> Option<(Value, &'static str)> {
    let space = project
        .root
        .join(format!("tokamax_baselines/{workload}/space.yaml"));
    if !space.is_file() {
        return None;
    }
    if let Ok(Some((key, _))) = cache.db.latest(&format!("tune/best[workload={workload}]")) {
        if let Ok(Some(rec)) = cache.db.get_action(&key) {
            if rec.status == "ok" {
                if let Some(p) = rec.result.get("best").and_then(|b| b.get("params")) {
                    return Some((p.clone(), "tuned"));
                }
            }
        }
    }
    let defaults = load_space(&space).ok()?.default_config().params;
    Some((Value::Object(defaults), "default"))
}

fn generated(workload: &str, kernel: &str, args: &EvalArgs, handtuned: Option<&Value>) -> Value {
    let cand = json!({"kind": "candidate", "path": kernel});
    let wl = format!("workloads/{workload}");
    let mut steps = serde_json::Map::new();
    let common = |kind: &str, needs: Vec<&str>, extra: Value| {
        let mut params = json!({"workload": wl, "impl": cand});
        if let (Value::Object(p), Value::Object(e)) = (&mut params, extra) {
            p.extend(e);
        }
        json!({"kind": kind, "foreach": [{"values": {"workload": [workload]}}], "needs": needs, "params": params, "timeout": args.timeout, "memory_mb": args.memory_mb})
    };
    steps.insert("compile".into(), common("compile", vec![], json!({})));
    steps.insert(
        "verify".into(),
        common(
            "verify",
            vec!["compile"],
            json!({"allow_pure_jax": args.allow_pure_jax}),
        ),
    );
    steps.insert(
        "profile".into(),
        common("profile", vec!["verify", "baseline/compile"], json!({})),
    );
    if let Some(cfg) = handtuned {
        let imp = json!({"kind": "baseline", "path": format!("tokamax_baselines/{workload}/baseline.py"), "config": cfg});
        steps.insert("handtuned_compile".into(), json!({"kind": "compile", "foreach": [{"values": {"workload": [workload]}}], "params": {"workload": wl, "impl": imp}, "timeout": 1800}));
        steps.insert("handtuned_verify".into(), json!({"kind": "verify", "foreach": [{"values": {"workload": [workload]}}], "needs": ["handtuned_compile"], "params": {"workload": wl, "impl": imp}, "timeout": 1800}));
        steps.insert(
            "handtuned_profile".into(),
            json!({"kind": "profile", "foreach": [{"values": {"workload": [workload]}}], "needs": ["handtuned_verify", "baseline/compile"], "params": {"workload": wl, "impl": imp}, "timeout": 1800}),
        );
    }
    json!({"name": EVAL, "default": false, "steps": steps})
}

fn find<'a>(steps: &'a [StepReport], id: &str) -> Option<&'a StepReport> {
    steps.iter().find(|s| s.step == id)
}

fn timing(r: Option<&StepReport>) -> Value {
    match r {
        Some(r) if r.status == "ok" => json!({
            "median_ms": r.result.get("median_ms"),
            "wall_median_ms": r.result.get("wall_median_ms"),
            "samples": r.result.get("samples_ms").and_then(Value::as_array).map(Vec::len),
            "tflops": r.result.get("tflops"),
            "interpret": r.result.get("interpret"),
            "step": r.step,
            "key": r.key,
        }),
        Some(r) => json!({"status": r.status, "reasons": r.result.get("reasons"), "step": r.step}),
        None => Value::Null,
    }
}

fn median(v: &Value) -> Option<f64> {
    v.get("median_ms").and_then(Value::as_f64)
}

pub fn run(global: &GlobalOpts, args: EvalArgs) -> anyhow::Result<i32> {
    let kernel = absolute(&args.kernel);
    if !kernel.is_file() {
        return Err(
            JbError::Usage(format!("--kernel {}: no such file", args.kernel.display())).into(),
        );
    }
    let mut wl_name = String::new();
    let mut handtuned_kind = None;
    let session = Session::open_with(global, Python::IfNeeded, |project| {
        wl_name = resolve::workload(project, &args.workload)?;
        let cache = crate::cache::Cache::open(&project.cache_dir)?;
        let ht = handtuned_config(project, &cache, &wl_name);
        handtuned_kind = ht.as_ref().map(|(_, k)| *k);
        let spec = generated(
            &wl_name,
            &kernel.to_string_lossy(),
            &args,
            ht.as_ref().map(|(c, _)| c),
        );
        let text = serde_norway::to_string(&spec).map_err(|e| JbError::Worker(e.to_string()))?;
        Ok(vec![parse_pipeline(
            std::path::Path::new("<jb eval>"),
            &text,
        )?])
    })?;
    let xla_profile = format!("baseline/profile[workload={wl_name}]");
    let mut targets = vec![format!("{EVAL}/*"), xla_profile.clone()];
    targets.retain(|t| t.contains('*') || session.set.steps.iter().any(|s| s.id == *t));
    let selected = crate::graph::select(&session.set, &targets)?;
    let order = closure_in_order(&session.set, &selected);
    let engine = session.engine()?;
    let opts = BuildOptions {
        jobs: 2,
        keep_going: true,
        remeasure: args.remeasure,
        timeout: None,
        exclusive_measurements: session.backend == "cpu",
        devices: 1,
        progress: if global.json {
            progress::Mode::Quiet
        } else {
            progress::Mode::Lines
        },
        command: std::env::args().collect::<Vec<_>>().join(" "),
    };
    let summary = engine.build(&session.set, &order, &opts)?;
    let steps = &summary.steps;
    let id = |step: &str| format!("{EVAL}/{step}[workload={wl_name}]");
    let compile = find(steps, &id("compile"));
    let verify = find(steps, &id("verify"));
    let profile = find(steps, &id("profile"));
    // The candidate's status: the first step that did not pass decides.
    let (status, reasons) = match (compile, verify) {
        (Some(c), _) if c.status != "ok" => (c.status.clone(), c.result.get("reasons").cloned()),
        (_, Some(v)) => (v.status.clone(), v.result.get("reasons").cloned()),
        _ => (
            "crashed".to_string(),
            Some(json!(["the candidate was not evaluated"])),
        ),
    };
    let mut reasons: Vec<Value> = reasons
        .and_then(|r| r.as_array().cloned())
        .unwrap_or_default();
    if let Some(e) = compile
        .and_then(|c| c.result.get("error"))
        .filter(|e| !e.is_null())
    {
        if status != "correct" {
            reasons.push(e.clone());
        }
    }
    let baseline = timing(find(steps, &xla_profile));
    let kernel_t = if status == "correct" {
        timing(profile)
    } else {
        Value::Null
    };
    let handtuned = timing(find(steps, &id("handtuned_profile")));
    let speedup = |base: &Value| match (median(base), median(&kernel_t)) {
        (Some(b), Some(k)) if k > 0.0 => json!(b / k),
        _ => Value::Null,
    };
    let trials = verify
        .and_then(|v| v.result.get("trials"))
        .and_then(Value::as_array)
        .map(Vec::len);
    let out = json!({
        "workload": wl_name,
        "kernel": kernel,
        "status": status,
        "reasons": reasons,
        "correctness": {
            "trials": trials,
            "max_abs_err": verify.and_then(|v| v.result.get("max_abs_err")),
            "max_rel_err": verify.and_then(|v| v.result.get("max_rel_err")),
            "per_trial": verify.and_then(|v| v.result.get("trials")),
        },
        "baseline": baseline,
        "kernel_timing": kernel_t,
        "handtuned": handtuned,
        "handtuned_config": handtuned_kind,
        "speedup_vs_xla": speedup(&baseline),
        "speedup_vs_handtuned": speedup(&handtuned),
        "has_pallas_call": compile.and_then(|c| c.result.get("has_pallas_call")),
        "interpret": compile.and_then(|c| c.result.get("interpret")),
        "scale": session.scale,
        "backend": session.backend,
        "run_id": summary.run_id,
    });
    // `kernel` in the contract is the candidate's timing; keep the path under `kernel_path`.
    let mut out = out;
    out["kernel_path"] = out["kernel"].take();
    out["kernel"] = out["kernel_timing"].take();
    out.as_object_mut().map(|m| m.remove("kernel_timing"));
    if global.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("{wl_name}: {status}");
        for r in &reasons {
            println!(
                "  - {}",
                r.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| r.to_string())
            );
        }
        if let Some(t) = trials {
            println!(
                "  correctness: {t} trials, max abs err {}, max rel err {}",
                out["correctness"]["max_abs_err"], out["correctness"]["max_rel_err"]
            );
        }
        let ms = |v: &Value| {
            median(v)
                .map(|m| format!("{m:.4} ms"))
                .unwrap_or_else(|| "-".into())
        };
        println!("  XLA baseline      {}", ms(&out["baseline"]));
        println!(
            "  hand-tuned ({})  {}",
            handtuned_kind.unwrap_or("none"),
            ms(&out["handtuned"])
        );
        println!("  candidate         {}", ms(&out["kernel"]));
        if let Some(s) = out["speedup_vs_xla"].as_f64() {
            println!("  speedup vs XLA    {s:.3}x");
        }
        if let Some(s) = out["speedup_vs_handtuned"].as_f64() {
            println!("  speedup vs hand-tuned {s:.3}x");
        }
        if out["interpret"] == true {
            println!("  note: Pallas ran in interpret mode on {}: times say nothing about accelerator speed", session.backend);
        }
    }
    Ok(if status == "correct" {
        exit::OK
    } else {
        exit::FAILED
    })
}
