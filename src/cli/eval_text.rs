//! `jb eval`'s text output: what a kernel author reads (the `--json` contract is separate).

use std::fmt::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::eval::{EvalResult, Timing};

/// Where the candidate's profile trace is stored (a blob of the cache), when it has one.
pub fn trace_of(opts: &crate::session::Options, out: &EvalResult) -> Option<PathBuf> {
    let Some(Timing::Measured(m)) = &out.kernel else {
        return None;
    };
    let project = crate::session::project(opts).ok()?;
    let cache = crate::cache::Cache::open(&project.cache_dir).ok()?;
    let rec = cache.db.get_action(&m.key).ok()??;
    trace_in(&rec.files).map(|d| cache.cas.path_of(d))
}

/// The digest of the trace Perfetto opens (the `.json.gz` one) among a record's files.
fn trace_in(files: &std::collections::BTreeMap<String, String>) -> Option<&String> {
    files
        .iter()
        .find(|(name, _)| name.starts_with("trace/") && name.contains(".json"))
        .map(|(_, d)| d)
}

/// A number the worker produced, for a reader: `-` when absent (never `null`).
fn num(v: &Option<Value>) -> String {
    match v {
        Some(Value::Number(n)) => match n.as_f64() {
            Some(x) if x == 0.0 || (1e-4..1e6).contains(&x.abs()) => format!("{x:.4}")
                .trim_end_matches('0')
                .trim_end_matches('.')
                .to_string(),
            Some(x) => format!("{x:.3e}"),
            None => n.to_string(),
        },
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => "-".into(),
        Some(v) => v.to_string(),
    }
}

fn ms(v: &Option<Timing>) -> String {
    v.as_ref()
        .and_then(Timing::median_ms)
        .map(|m| format!("{m:.4} ms"))
        .unwrap_or_else(|| "-".into())
}

/// The verify step's tolerance rule in one phrase.
fn tolerance(t: &Value) -> Option<String> {
    let kind = t.get("kind")?.as_str()?;
    let f = |k: &str| num(&t.get(k).cloned());
    Some(match kind {
        "noise" => format!(
            "noise rule (per element {}x the reference's rounding noise, RMS {}x, floor {}, atol {}, rtol {})",
            f("k_elem"),
            f("k_rms"),
            f("floor"),
            f("atol"),
            f("rtol")
        ),
        other => format!("{other} rule (atol {}, rtol {})", f("atol"), f("rtol")),
    })
}

/// The correctness lines: trials, errors, the seed to replay with and the tolerance.
fn correctness(s: &mut String, out: &EvalResult) {
    let c = &out.correctness;
    let Some(t) = c.trials else { return };
    let errs = if c.max_abs_err.as_ref().is_none_or(Value::is_null) {
        "no trial produced a comparable (finite) output".to_string()
    } else {
        format!(
            "max abs err {}, max rel err {}",
            num(&c.max_abs_err),
            num(&c.max_rel_err)
        )
    };
    let _ = writeln!(s, "  correctness: {t} trials, {errs}");
    if let Some(seed) = c.seed.as_ref().filter(|v| !v.is_null()) {
        let _ = writeln!(
            s,
            "  replay: jb eval --workload {} --kernel {} --seed {seed}",
            out.workload,
            out.kernel_path.display()
        );
    }
    let tol = out
        .verify
        .as_ref()
        .and_then(|v| v.fields.get("tolerance"))
        .and_then(tolerance);
    if let Some(tol) = tol {
        let _ = writeln!(s, "  tolerance: {tol}");
    }
    let partly = |v: &&Value| v["status"] == "specialized" || v["status"] == "partly_specialized";
    if let Some(v) = c.variants.as_ref().filter(partly) {
        for sp in v["specialized"].as_array().into_iter().flatten() {
            let _ = writeln!(
                s,
                "  variants: specialized at {}: {}",
                sp["override"],
                sp["reason"].as_str().unwrap_or("-")
            );
        }
    }
}

/// The paired measurement's medians, by role (`impl`: the candidate, `xla`, `handtuned`).
fn paired_median(out: &EvalResult, role: &str) -> Option<f64> {
    out.measurement
        .as_ref()?
        .programs
        .as_ref()?
        .iter()
        .find(|p| p.role.as_ref().and_then(Value::as_str) == Some(role))?
        .median_ms
        .as_ref()?
        .as_f64()
}

fn speedups(s: &mut String, out: &EvalResult) {
    let ci = |v: &Option<[f64; 2]>| match v {
        Some([lo, hi]) => format!(" (95% CI {lo:.3}-{hi:.3})"),
        None => String::new(),
    };
    let cand = paired_median(out, "impl");
    let beside = |role: &str, name: &str| match (cand, paired_median(out, role)) {
        (Some(c), Some(b)) => format!("   paired medians: {name} {b:.4} ms / candidate {c:.4} ms"),
        _ => String::new(),
    };
    if let Some(why) = &out.unmeasured {
        let _ = writeln!(s, "  speedup           none: {why}");
    }
    if let Some(x) = out.speedup_vs_xla {
        let _ = writeln!(
            s,
            "  speedup vs XLA    {x:.3}x{}{}",
            ci(&out.speedup_ci),
            beside("xla", "XLA")
        );
    }
    if let Some(x) = out.speedup_vs_handtuned {
        let _ = writeln!(
            s,
            "  speedup vs hand-tuned {x:.3}x{}{}",
            ci(&out.speedup_vs_handtuned_ci),
            beside("handtuned", "hand-tuned")
        );
    }
    let slowed = &out.baseline_slowed_in_pair;
    for (g, name) in [
        (slowed.xla, "XLA"),
        (slowed.handtuned, "the hand-tuned kernel"),
    ] {
        if let Some(g) = g {
            let _ = writeln!(
                s,
                "  note: {name} ran {:.2}x slower beside the candidate than alone: speedup capped at {:.3}x (no interval)",
                g.ratio, g.capped
            );
        }
    }
}

/// The compiled program's cost (FLOPs, bytes, intensity), as the agent's feedback has it.
fn cost(s: &mut String, out: &EvalResult) {
    let Ok(v) = serde_json::to_value(out) else {
        return;
    };
    let device = crate::device::from_device_kind("", &out.backend);
    let median = out.kernel.as_ref().and_then(Timing::median_ms);
    if let Some(c) = crate::agent::feedback::cost_summary(&v, device, median) {
        let _ = writeln!(s, "  {c}");
    }
    if let Some(Timing::Measured(m)) = &out.kernel {
        if let Some(t) = m.tflops.as_ref().and_then(Value::as_f64) {
            let _ = writeln!(s, "  achieved throughput {t:.4} TFLOP/s");
        }
    }
}

/// The result for a reader; `trace` is where the candidate's profile trace is stored.
pub fn render(out: &EvalResult, trace: Option<&Path>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}: {}", out.workload, out.status);
    for r in &out.reasons {
        let text = r
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| r.to_string());
        // A traceback's tail runs over several lines: the later ones indented under the first.
        let _ = writeln!(s, "  - {}", text.trim_end().replace('\n', "\n    "));
    }
    correctness(&mut s, out);
    let _ = writeln!(
        s,
        "  XLA baseline      {}   (its own profile step, not paired)",
        ms(&out.baseline)
    );
    let _ = writeln!(
        s,
        "  hand-tuned ({})  {}",
        out.handtuned_config.map_or("none", |h| h.as_str()),
        ms(&out.handtuned)
    );
    let _ = writeln!(s, "  candidate         {}", ms(&out.kernel));
    speedups(&mut s, out);
    if let Some(m) = &out.measurement {
        if let Some(stop) = m.stop.as_ref().and_then(Value::as_str) {
            let _ = writeln!(
                s,
                "  paired measurement: {} rounds, stopped: {stop}",
                num(&m.rounds)
            );
        }
    }
    cost(&mut s, out);
    if let Some(t) = trace {
        let _ = writeln!(s, "  trace: {} (gzipped Chrome JSON)", t.display());
        let _ = writeln!(
            s,
            "  open it in Perfetto: ui.perfetto.dev > Open trace file > {}",
            t.display()
        );
    }
    if out.interpret == Some(Value::Bool(true)) {
        let _ = writeln!(
            s,
            "  note: Pallas ran in interpret mode on {}: times say nothing about accelerator speed",
            out.backend
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::{
        Correctness, Measured, Measurement, PerRole, ProgramTiming, StageDetail, Unpaired,
    };
    use crate::outcome::StepStatus;
    use crate::report::paired::Slowed;
    use serde_json::json;

    fn measured(ms: f64, key: &str) -> Option<Timing> {
        Some(Timing::Measured(Measured {
            median_ms: Some(ms),
            wall_median_ms: Some(ms * 1.1),
            samples: Some(50),
            tflops: Some(json!(0.0123)),
            interpret: Some(json!(false)),
            step: format!("eval/profile[{key}]"),
            key: key.into(),
        }))
    }

    fn program(role: &str, ms: f64) -> ProgramTiming {
        ProgramTiming {
            role: Some(json!(role)),
            median_ms: Some(json!(ms)),
            iqr_rel: Some(json!(0.01)),
            n: Some(json!(40)),
        }
    }

    /// A correct candidate whose paired medians (0.5 / 0.25 ms) differ from the separate
    /// baseline step's time (0.8 ms): the speedup's own medians must be printed beside it.
    fn correct() -> EvalResult {
        let mut verify = serde_json::Map::new();
        verify.insert(
            "tolerance".into(),
            json!({"kind": "noise", "k_elem": 32.0, "k_rms": 1.5, "floor": 1.0,
                   "max_rel_rms": 0.5, "atol": 0.01, "rtol": 0.01, "cap": null}),
        );
        let mut compile = serde_json::Map::new();
        compile.insert(
            "cost".into(),
            json!({"flops": 2.0e9, "bytes_accessed": 4.0e7}),
        );
        EvalResult {
            workload: "12p_RMSNorm".into(),
            status: StepStatus::Correct,
            reasons: vec![],
            correctness: Correctness {
                trials: Some(8),
                seed: Some(json!(1234567)),
                max_abs_err: Some(json!(0.0)),
                max_rel_err: Some(json!(0.0)),
                per_trial: None,
                variants: None,
            },
            baseline: measured(0.8, "b"),
            kernel: measured(0.25, "k"),
            handtuned: None,
            handtuned_config: None,
            speedup_vs_xla: Some(2.0),
            speedup_ci: Some([1.9, 2.1]),
            speedup_vs_handtuned: None,
            speedup_vs_handtuned_ci: None,
            baseline_slowed_in_pair: PerRole {
                xla: None,
                handtuned: None,
            },
            speedup_unpaired: Unpaired {
                vs_xla: Some(3.2),
                vs_handtuned: None,
            },
            measurement: Some(Measurement {
                rounds: Some(json!(12)),
                round_iters: None,
                stop: Some(json!("converged")),
                elapsed_s: None,
                timing_source: None,
                programs: Some(vec![program("impl", 0.25), program("xla", 0.5)]),
                skipped: None,
                vs_xla: None,
                vs_handtuned: None,
            }),
            has_pallas_call: Some(json!(true)),
            interpret: Some(json!(false)),
            trust: None,
            export: None,
            compile: Some(StageDetail {
                status: StepStatus::Ok,
                cached: false,
                fields: compile,
            }),
            verify: Some(StageDetail {
                status: StepStatus::Correct,
                cached: false,
                fields: verify,
            }),
            scale: "cpu".into(),
            backend: "cpu".into(),
            run_id: 1,
            kernel_path: PathBuf::from("/k/rms.py"),
            interrupted: false,
            speed_of_light: None,
            unmeasured: None,
        }
    }

    #[test]
    fn correct_candidate_text() {
        let out = correct();
        let text = render(&out, Some(Path::new("/c/cas/ab/cdef")));
        // The paired speedup sits beside the medians it is the ratio of.
        assert!(
            text.contains(
                "2.000x (95% CI 1.900-2.100)   paired medians: XLA 0.5000 ms / candidate 0.2500 ms"
            ),
            "{text}"
        );
        assert!(text.contains("--seed 1234567"), "{text}");
        assert!(text.contains("50.00 FLOP/byte"), "{text}");
        assert!(text.contains("ui.perfetto.dev"), "{text}");
        insta::assert_snapshot!(text);
    }

    #[test]
    fn no_null_and_slowed_note() {
        let mut out = correct();
        out.status = StepStatus::Incorrect;
        out.correctness.max_abs_err = Some(Value::Null);
        out.correctness.max_rel_err = Some(Value::Null);
        out.kernel = None;
        out.measurement = None;
        out.speedup_vs_xla = None;
        out.baseline_slowed_in_pair.xla = Some(Slowed {
            paired_ms: 1.2,
            alone_ms: 0.8,
            ratio: 1.5,
            capped: 0.9,
        });
        let text = render(&out, None);
        assert!(!text.contains("null"), "{text}");
        assert!(text.contains("no trial produced a comparable"), "{text}");
        assert!(
            text.contains("ran 1.50x slower beside the candidate"),
            "{text}"
        );
        insta::assert_snapshot!(text);
    }
}
