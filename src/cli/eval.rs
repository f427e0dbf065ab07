//! `jb eval`: compile, verify and profile one candidate kernel beside the XLA baseline and the
//! hand-tuned baseline, as one incremental build. [`evaluate`] (one file) and
//! [`evaluate_batch`] (several, in one build) are also what `jb agent` evaluates samples with.

use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::{json, Value};

use crate::engine::{closure_in_order, progress, BuildOptions, StepReport};
use crate::error::{exit, JbError};
use crate::exec::route::weakest;
use crate::exec::sandbox::{refusal, SandboxMode, Trust};
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
    /// Measure again even when the measurement is cached (rounds pool with earlier ones).
    #[arg(long)]
    pub remeasure: bool,
    /// Replay an evaluation: the seed its inputs were drawn from (the `seed` of a verify
    /// result). Without it, every evaluation draws a secret seed from OS randomness.
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    /// Time budget of the paired measurement in seconds: rounds stop when every speedup's 95 %
    /// interval is within 2 % of it, or when the budget is spent (default 20).
    #[arg(long, value_name = "SECONDS")]
    pub measure_budget: Option<f64>,
}

const EVAL: &str = "jb-eval";

/// How candidates are evaluated.
#[derive(Debug, Clone)]
pub struct EvalSettings {
    /// Per-step wall-clock limit, seconds.
    pub timeout: f64,
    pub memory_mb: u64,
    pub allow_pure_jax: bool,
    pub remeasure: bool,
    /// Time budget of the candidate's paired measurement, seconds (None: the profile op's default).
    pub measure_budget: Option<f64>,
    /// Also compile, verify and profile the hand-tuned baseline (where the workload has one).
    pub handtuned: bool,
    pub jobs: usize,
    pub progress: progress::Mode,
    /// The seed of the verify and profile inputs (replay); `None`: drawn in secret by the judge.
    pub seed: Option<u64>,
}

/// One candidate of a batch: its generated pipeline's name (unique in the batch), the
/// workload (folder name) and the kernel file.
#[derive(Debug, Clone)]
pub struct CandidateRef {
    pub pipeline: String,
    pub workload: String,
    pub kernel: PathBuf,
}

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

fn generated(
    name: &str,
    workload: &str,
    kernel: &str,
    s: &EvalSettings,
    handtuned: Option<&Value>,
) -> Value {
    let cand = json!({"kind": "candidate", "path": kernel});
    let wl = format!("workloads/{workload}");
    let mut steps = serde_json::Map::new();
    let common = |kind: &str, needs: Vec<&str>, extra: Value| {
        let mut params = json!({"workload": wl, "impl": cand});
        if let (Value::Object(p), Value::Object(e)) = (&mut params, extra) {
            p.extend(e);
        }
        json!({"kind": kind, "foreach": [{"values": {"workload": [workload]}}], "needs": needs, "params": params, "timeout": s.timeout, "memory_mb": s.memory_mb})
    };
    // A replayed seed is a parameter (and so part of the key); without one the judge draws it.
    let seeded = |mut extra: Value| {
        if let (Some(seed), Value::Object(m)) = (s.seed, &mut extra) {
            m.insert("seed".into(), json!(seed));
        }
        extra
    };
    // The candidate's code runs only in `export` (a fresh sandboxed worker); the steps after it
    // judge the exported program (or, where it cannot be exported, run it in the sandbox).
    steps.insert("export".into(), common("export", vec![], json!({})));
    steps.insert(
        "compile".into(),
        common("compile", vec!["export"], json!({})),
    );
    steps.insert(
        "verify".into(),
        common(
            "verify",
            vec!["export", "compile"],
            seeded(json!({"allow_pure_jax": s.allow_pure_jax})),
        ),
    );
    // The candidate is timed paired with XLA and the hand-tuned kernel: interleaved rounds in
    // one process, so that its speedups hold on a noisy machine (python/jb/ops/profile.py).
    let handtuned_impl = handtuned.map(|cfg| json!({"kind": "baseline", "path": format!("tokamax_baselines/{workload}/baseline.py"), "config": cfg}));
    let mut pair = vec![json!({"kind": "xla"})];
    pair.extend(handtuned_impl.clone());
    let mut measure = json!({"pair": pair});
    if let Some(b) = s.measure_budget {
        measure["budget_s"] = json!(b);
    }
    steps.insert(
        "profile".into(),
        common(
            "profile",
            vec!["export", "verify", "baseline/compile"],
            seeded(measure),
        ),
    );
    if let Some(imp) = handtuned_impl {
        steps.insert("handtuned_compile".into(), json!({"kind": "compile", "foreach": [{"values": {"workload": [workload]}}], "params": {"workload": wl, "impl": imp}, "timeout": 1800}));
        steps.insert("handtuned_verify".into(), json!({"kind": "verify", "foreach": [{"values": {"workload": [workload]}}], "needs": ["handtuned_compile"], "params": {"workload": wl, "impl": imp}, "timeout": 1800}));
        steps.insert(
            "handtuned_profile".into(),
            json!({"kind": "profile", "foreach": [{"values": {"workload": [workload]}}], "needs": ["handtuned_verify", "baseline/compile"], "params": {"workload": wl, "impl": imp}, "timeout": 1800}),
        );
    }
    json!({"name": name, "default": false, "steps": steps})
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

/// How far the candidate's numbers can be trusted: the weakest `trust` of its steps (the
/// sandboxed export step only weakens it when it ran unsandboxed).
fn trust_of(export: Option<&StepReport>, judged: &[Option<&StepReport>]) -> Value {
    let t = |r: &StepReport| {
        r.result
            .get("trust")
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let export_trust = export.and_then(t).map(|e| {
        if e == Trust::Unsandboxed.as_str() {
            e
        } else {
            Trust::Artifact.as_str().to_string()
        }
    });
    let all: Vec<String> = judged
        .iter()
        .flatten()
        .filter_map(|r| t(r))
        .chain(export_trust)
        .collect();
    match weakest(all.iter().map(String::as_str)) {
        // Nothing was judged (the export stage failed): its own trust is all there is.
        Some(_) if judged.iter().flatten().all(|r| t(r).is_none()) => {
            export.and_then(t).map(Value::String).unwrap_or(Value::Null)
        }
        Some(t) => json!(t.as_str()),
        None => Value::Null,
    }
}

/// Refuse to evaluate candidates when the sandbox cannot start (unless `--no-sandbox`).
pub fn require_sandbox(session: &Session) -> anyhow::Result<()> {
    match session.sandbox_mode() {
        SandboxMode::Unavailable(e) => Err(JbError::Worker(refusal(&e)).into()),
        SandboxMode::On(_) | SandboxMode::Off => Ok(()),
    }
}

/// How the candidate's paired measurement went: rounds, what stopped it, the programs' medians.
fn measurement_json(profile: Option<&StepReport>, xla: &Value, handtuned: &Value) -> Value {
    let Some(paired) = profile.and_then(|p| p.result.get("paired")) else {
        return Value::Null;
    };
    json!({
        "rounds": paired.get("rounds"),
        "round_iters": paired.get("round_iters"),
        "stop": paired.get("stop"),
        "elapsed_s": paired.get("elapsed_s"),
        "timing_source": paired.get("timing_source"),
        "programs": paired.get("programs").and_then(Value::as_array).map(|ps| ps.iter().map(|p| json!({
            "role": p.get("role"), "median_ms": p.get("median_ms"), "iqr_rel": p.get("iqr_rel"), "n": p.get("n"),
        })).collect::<Vec<_>>()),
        "skipped": paired.get("skipped"),
        "vs_xla": xla,
        "vs_handtuned": handtuned,
    })
}

fn median(v: &Value) -> Option<f64> {
    v.get("median_ms").and_then(Value::as_f64)
}

/// The fields of a compile or verify step that explain a failure.
fn detail(r: Option<&StepReport>, fields: &[&str]) -> Value {
    let Some(r) = r else { return Value::Null };
    let mut m = serde_json::Map::new();
    m.insert("status".into(), json!(r.status));
    m.insert("cached".into(), json!(r.cached));
    for f in fields {
        if let Some(v) = r.result.get(*f).filter(|v| !v.is_null()) {
            m.insert((*f).to_string(), v.clone());
        }
    }
    Value::Object(m)
}

/// How bad a candidate's stage status is (0: passed; higher is worse); `None` for statuses that
/// are not the candidate's doing (a step skipped because another failed, unsupported, invalid).
fn severity(status: &str) -> Option<u8> {
    Some(match status {
        "ok" | "correct" => 0,
        "incorrect" => 1,
        "runtime_error" | "timeout" | "crashed" => 2,
        "compile_error" => 3,
        "rejected" => 4,
        _ => return None,
    })
}

/// The evaluation's status and reasons: the worst status of compile, verify and profile (the
/// earliest stage on a tie), `crashed` when verify never ran. Reasons of a later stage are
/// prefixed with its name.
fn overall_status(
    compile: Option<&StepReport>,
    verify: Option<&StepReport>,
    profile: Option<&StepReport>,
) -> (String, Vec<Value>) {
    let reasons_of = |r: &StepReport, prefix: &str| -> Vec<Value> {
        r.result
            .get("reasons")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|v| match (prefix, v.as_str()) {
                ("", _) | (_, None) => v.clone(),
                (p, Some(t)) => json!(format!("{p}: {t}")),
            })
            .collect()
    };
    let mut worst: Option<(u8, &StepReport, &str)> = None;
    for (r, prefix) in [(compile, ""), (verify, ""), (profile, "profile")] {
        let Some(r) = r else { continue };
        let Some(rank) = severity(r.status.as_str()) else {
            continue;
        };
        if worst.is_none_or(|(w, _, _)| rank > w) {
            worst = Some((rank, r, prefix));
        }
    }
    match (worst, verify) {
        (Some((rank, r, prefix)), _) if rank > 0 => (r.status.to_string(), reasons_of(r, prefix)),
        (_, Some(v)) => (v.status.to_string(), reasons_of(v, "")),
        _ => (
            "crashed".to_string(),
            vec![json!("the candidate was not evaluated")],
        ),
    }
}

/// The candidate's paired speedups: (speedup, [lo, hi], this measurement, pooled) per role,
/// pooled over `--remeasure` runs where the database has several.
fn paired_json(
    profile: Option<&StepReport>,
    db: Option<&crate::cache::db::Db>,
    role: &str,
) -> Value {
    let Some(p) = profile.filter(|p| p.status == "ok") else {
        return Value::Null;
    };
    let field = crate::report::paired::ROLES
        .iter()
        .find(|(r, _)| *r == role)
        .map(|(_, f)| *f)
        .unwrap_or("speedup_vs_xla");
    let this = p.result.get(field).cloned().unwrap_or(Value::Null);
    let pooled = db.and_then(|db| {
        crate::report::paired::pooled(db, &p.key, role)
            .ok()
            .flatten()
    });
    let best = crate::report::paired::best_estimate(&p.result, role, pooled.as_ref());
    json!({
        "speedup": best.map(|b| b.point),
        "ci": best.and_then(|b| b.interval()).map(|(lo, hi)| json!([lo, hi])),
        "this_measurement": this,
        "pooled": pooled,
    })
}

/// The result JSON of one candidate (the `jb eval --json` contract) from a finished build.
#[allow(clippy::too_many_arguments)]
fn result_json(
    steps: &[StepReport],
    pipeline: &str,
    wl_name: &str,
    kernel: &Path,
    handtuned_kind: Option<&str>,
    session: &Session,
    run_id: i64,
    db: Option<&crate::cache::db::Db>,
) -> Value {
    let id = |step: &str| format!("{pipeline}/{step}[workload={wl_name}]");
    let xla_profile = format!("baseline/profile[workload={wl_name}]");
    let export = find(steps, &id("export"));
    let compile = find(steps, &id("compile"));
    let verify = find(steps, &id("verify"));
    let profile = find(steps, &id("profile"));
    // The candidate's status: an export that failed decides; otherwise the worst of its stages
    // (a profile `rejected` is not `correct`).
    let (status, mut reasons) = match export.filter(|e| e.status.is_failure()) {
        Some(e) => (
            e.status.to_string(),
            e.result
                .get("reasons")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        ),
        None => overall_status(compile, verify, profile),
    };
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
    // Ratios of separate measurements (the XLA and hand-tuned profile steps): kept beside the
    // paired speedups for comparison, and used where the candidate was not measured paired.
    let unpaired = |base: &Value| match (median(base), median(&kernel_t)) {
        (Some(b), Some(k)) if k > 0.0 => json!(b / k),
        _ => Value::Null,
    };
    let (paired_xla, paired_ht) = if status == "correct" {
        (
            paired_json(profile, db, "xla"),
            paired_json(profile, db, "handtuned"),
        )
    } else {
        (Value::Null, Value::Null)
    };
    let pick = |paired: &Value, base: &Value| match paired.get("speedup").filter(|v| !v.is_null()) {
        Some(v) => v.clone(),
        None => unpaired(base),
    };
    let ci = |paired: &Value| paired.get("ci").cloned().unwrap_or(Value::Null);
    // A baseline much slower beside the candidate than alone: the candidate may have slowed it.
    // The speedup is then capped at the baseline alone over the candidate (never raised).
    let guard = |paired: &Value, role: &str, base: &Value| {
        let point = paired.get("speedup").and_then(Value::as_f64)?;
        crate::report::paired::slowed(
            point,
            profile.and_then(|p| crate::report::paired::pair_median(&p.result, role)),
            median(base),
            median(&kernel_t),
        )
    };
    let (xla_slowed, ht_slowed) = (
        guard(&paired_xla, "xla", &baseline),
        guard(&paired_ht, "handtuned", &handtuned),
    );
    let guarded = |paired: &Value, base: &Value, g: Option<crate::report::paired::Slowed>| match g {
        Some(g) => (json!(g.capped), Value::Null),
        None => (pick(paired, base), ci(paired)),
    };
    let (speedup_xla, speedup_xla_ci) = guarded(&paired_xla, &baseline, xla_slowed);
    let (speedup_ht, speedup_ht_ci) = guarded(&paired_ht, &handtuned, ht_slowed);
    let trials = verify
        .and_then(|v| v.result.get("trials"))
        .and_then(Value::as_array)
        .map(Vec::len);
    json!({
        "workload": wl_name,
        "status": status,
        "reasons": reasons,
        "correctness": {
            "trials": trials,
            "seed": verify.and_then(|v| v.result.get("seed")),
            "max_abs_err": verify.and_then(|v| v.result.get("max_abs_err")),
            "max_rel_err": verify.and_then(|v| v.result.get("max_rel_err")),
            "per_trial": verify.and_then(|v| v.result.get("trials")),
        },
        "baseline": baseline,
        // `kernel` in the contract is the candidate's timing; the path is `kernel_path`.
        "kernel": kernel_t,
        "handtuned": handtuned,
        "handtuned_config": handtuned_kind,
        "speedup_vs_xla": speedup_xla,
        "speedup_ci": speedup_xla_ci,
        "speedup_vs_handtuned": speedup_ht,
        "speedup_vs_handtuned_ci": speedup_ht_ci,
        "baseline_slowed_in_pair": {"xla": xla_slowed, "handtuned": ht_slowed},
        "speedup_unpaired": {"vs_xla": unpaired(&baseline), "vs_handtuned": unpaired(&handtuned)},
        "measurement": measurement_json(profile, &paired_xla, &paired_ht),
        "has_pallas_call": compile.and_then(|c| c.result.get("has_pallas_call")),
        "interpret": compile.and_then(|c| c.result.get("interpret")),
        "trust": trust_of(export, &[compile, verify, profile]),
        "export": detail(export, &["programs", "error_class", "error", "reasons", "stderr_tail"]),
        "compile": detail(compile, &["compile_ms", "cost", "memory", "error_class", "error", "reasons", "stderr_tail"]),
        "verify": detail(verify, &["error_class", "error", "reasons", "notes", "stderr_tail", "recheck", "claimed_status"]),
        "scale": session.scale,
        "backend": session.backend,
        "run_id": run_id,
        "kernel_path": kernel,
    })
}

/// Compile, verify and profile several candidates in one build (the XLA baselines they are
/// compared with included); one result JSON per candidate, in order.
pub fn evaluate_batch(
    global: &GlobalOpts,
    cands: &[CandidateRef],
    s: &EvalSettings,
) -> anyhow::Result<Vec<Value>> {
    if cands.is_empty() {
        return Ok(Vec::new());
    }
    let mut kinds: Vec<Option<&'static str>> = Vec::new();
    let session = Session::open_with(global, Python::IfNeeded, |project| {
        let cache = crate::cache::Cache::open(&project.cache_dir)?;
        let mut out = Vec::new();
        for c in cands {
            let ht = if s.handtuned {
                handtuned_config(project, &cache, &c.workload)
            } else {
                None
            };
            kinds.push(ht.as_ref().map(|(_, k)| *k));
            let spec = generated(
                &c.pipeline,
                &c.workload,
                &c.kernel.to_string_lossy(),
                s,
                ht.as_ref().map(|(v, _)| v),
            );
            let text =
                serde_norway::to_string(&spec).map_err(|e| JbError::Worker(e.to_string()))?;
            let mut loaded = parse_pipeline(Path::new(&format!("<{}>", c.pipeline)), &text)?;
            // The candidate file may live outside the project: this pipeline may name it.
            loaded
                .file
                .allow_outside
                .push(c.kernel.to_string_lossy().to_string());
            out.push(loaded);
        }
        Ok(out)
    })?;
    require_sandbox(&session)?;
    let mut targets: Vec<String> = cands.iter().map(|c| c.pipeline.clone()).collect();
    for c in cands {
        let xla = format!("baseline/profile[workload={}]", c.workload);
        if session.set.steps.iter().any(|st| st.id == xla) && !targets.contains(&xla) {
            targets.push(xla);
        }
    }
    let selected = crate::graph::select(&session.set, &targets)?;
    let order = closure_in_order(&session.set, &selected);
    let engine = session.engine()?;
    let opts = BuildOptions {
        jobs: s.jobs.max(1),
        keep_going: true,
        remeasure: s.remeasure,
        timeout: None,
        // On a Ray cluster the judges hold the devices (one step per device at a time).
        exclusive_measurements: session.backend == "cpu" && session.ray.is_none(),
        devices: if session.ray.is_some() {
            u32::MAX / 2
        } else {
            1
        },
        progress: s.progress,
        command: std::env::args().collect::<Vec<_>>().join(" "),
    };
    let summary = engine.build(&session.set, &order, &opts)?;
    if let Some(e) = session.cluster_failure() {
        return Err(e.into());
    }
    // Keep every fresh paired measurement's rounds, so that re-measurements pool.
    let cache = session.cache().ok();
    let db = cache.as_ref().map(|c| &c.db);
    if let Some(db) = db {
        for c in cands {
            let id = format!("{}/profile[workload={}]", c.pipeline, c.workload);
            if let Some(p) = find(&summary.steps, &id).filter(|p| !p.cached && p.status == "ok") {
                if let Err(e) =
                    crate::report::paired::record_rounds(db, &p.key, summary.run_id, &p.result)
                {
                    eprintln!("warning: could not keep the paired rounds of {id}: {e}");
                }
            }
        }
    }
    Ok(cands
        .iter()
        .zip(kinds)
        .map(|(c, kind)| {
            let mut v = result_json(
                &summary.steps,
                &c.pipeline,
                &c.workload,
                &c.kernel,
                kind,
                &session,
                summary.run_id,
                db,
            );
            if summary.interrupted {
                v["interrupted"] = json!(true);
            }
            v
        })
        .collect())
}

/// Evaluate one candidate file for a workload (folder name or id); the `jb eval` result JSON.
pub fn evaluate(
    global: &GlobalOpts,
    workload: &str,
    kernel: &Path,
    s: &EvalSettings,
) -> anyhow::Result<Value> {
    let kernel = absolute(kernel);
    if !kernel.is_file() {
        return Err(JbError::Usage(format!("--kernel {}: no such file", kernel.display())).into());
    }
    let project = super::session::project(global)?;
    let wl_name = resolve::workload(&project, workload)?;
    let mut out = evaluate_batch(
        global,
        &[CandidateRef {
            pipeline: EVAL.into(),
            workload: wl_name,
            kernel,
        }],
        s,
    )?;
    Ok(out.remove(0))
}

pub fn run(global: &GlobalOpts, args: EvalArgs) -> anyhow::Result<i32> {
    let settings = EvalSettings {
        timeout: args.timeout,
        memory_mb: args.memory_mb,
        allow_pure_jax: args.allow_pure_jax,
        remeasure: args.remeasure,
        measure_budget: args.measure_budget,
        handtuned: true,
        jobs: 2,
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
    let out = evaluate(global, &args.workload, &args.kernel, &settings)?;
    let status = out["status"].as_str().unwrap_or("crashed").to_string();
    let wl_name = out["workload"].as_str().unwrap_or("").to_string();
    if global.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("{wl_name}: {status}");
        for r in out["reasons"].as_array().into_iter().flatten() {
            println!(
                "  - {}",
                r.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| r.to_string())
            );
        }
        if let Some(t) = out["correctness"]["trials"].as_u64() {
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
            out["handtuned_config"].as_str().unwrap_or("none"),
            ms(&out["handtuned"])
        );
        println!("  candidate         {}", ms(&out["kernel"]));
        let ci = |v: &Value| match (v[0].as_f64(), v[1].as_f64()) {
            (Some(lo), Some(hi)) => format!("  (95% CI {lo:.3}-{hi:.3})"),
            _ => String::new(),
        };
        if let Some(s) = out["speedup_vs_xla"].as_f64() {
            println!("  speedup vs XLA    {s:.3}x{}", ci(&out["speedup_ci"]));
        }
        if let Some(s) = out["speedup_vs_handtuned"].as_f64() {
            println!(
                "  speedup vs hand-tuned {s:.3}x{}",
                ci(&out["speedup_vs_handtuned_ci"])
            );
        }
        for (role, name) in [("xla", "XLA"), ("handtuned", "the hand-tuned kernel")] {
            let g = &out["baseline_slowed_in_pair"][role];
            if let (Some(r), Some(c)) = (g["ratio"].as_f64(), g["capped"].as_f64()) {
                println!(
                    "  note: {name} ran {r:.2}x slower beside the candidate than alone: speedup capped at {c:.3}x (no interval)"
                );
            }
        }
        if let Some(stop) = out["measurement"]["stop"].as_str() {
            println!(
                "  paired measurement: {} rounds, stopped: {stop}",
                out["measurement"]["rounds"]
            );
        }
        if out["interpret"] == true {
            println!(
                "  note: Pallas ran in interpret mode on {}: times say nothing about accelerator speed",
                out["backend"].as_str().unwrap_or("cpu")
            );
        }
    }
    Ok(if out["interrupted"] == json!(true) {
        exit::INTERNAL
    } else if status == "correct" {
        exit::OK
    } else {
        exit::FAILED
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(status: &str, reasons: &[&str]) -> StepReport {
        StepReport {
            step: "s".into(),
            kind: "k".into(),
            status: status.into(),
            cached: false,
            key: String::new(),
            duration_ms: 0.0,
            reason: String::new(),
            result: json!({"reasons": reasons}),
        }
    }

    #[test]
    fn a_profile_rejection_makes_the_evaluation_rejected() {
        let (c, v, p) = (
            step("ok", &[]),
            step("correct", &[]),
            step("rejected", &["harness function replaced"]),
        );
        let (status, reasons) = overall_status(Some(&c), Some(&v), Some(&p));
        assert_eq!(status, "rejected");
        assert_eq!(reasons, vec![json!("profile: harness function replaced")]);
        // The agent counts it incorrect, never correct.
        let outcome = crate::agent::accounting::Outcome::of_eval(&status, Some(3.0));
        assert_eq!(outcome, crate::agent::accounting::Outcome::Incorrect);
    }

    #[test]
    fn the_worst_stage_decides_and_skips_do_not_count() {
        let (c, v, p) = (step("ok", &[]), step("correct", &[]), step("ok", &[]));
        assert_eq!(overall_status(Some(&c), Some(&v), Some(&p)).0, "correct");
        // A profile skipped (an upstream baseline failed) is not the candidate's doing.
        let skipped = step("skipped", &[]);
        assert_eq!(
            overall_status(Some(&c), Some(&v), Some(&skipped)).0,
            "correct"
        );
        // Verify incorrect, profile skipped: incorrect with verify's reasons.
        let wrong = step("incorrect", &["trial 1: off"]);
        let (s, r) = overall_status(Some(&c), Some(&wrong), Some(&skipped));
        assert_eq!((s.as_str(), r), ("incorrect", vec![json!("trial 1: off")]));
        // Correct but the timed run crashed: runtime_error beats correct.
        let crashed = step("runtime_error", &["boom"]);
        assert_eq!(
            overall_status(Some(&c), Some(&v), Some(&crashed)).0,
            "runtime_error"
        );
        // Incorrect and the profile rejected: rejected is worse.
        let rejected = step("rejected", &[]);
        assert_eq!(
            overall_status(Some(&c), Some(&wrong), Some(&rejected)).0,
            "rejected"
        );
        // Compile error: verify and profile never ran.
        let ce = step("compile_error", &["syntax"]);
        assert_eq!(
            overall_status(Some(&ce), Some(&skipped), Some(&skipped)).0,
            "compile_error"
        );
        // Nothing ran: crashed.
        assert_eq!(overall_status(None, None, None).0, "crashed");
    }
}
