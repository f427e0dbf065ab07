//! One candidate's [`EvalResult`] from a finished build's step reports.

use std::path::Path;

use serde_json::{Map, Value};

use super::result::{
    Correctness, EvalResult, HandtunedSource, Measured, Measurement, PairedSpeedup, PerRole,
    ProgramTiming, SpeedOfLight, StageDetail, Timing, Unpaired,
};
use super::status::overall_status;
use crate::cache::db::Db;
use crate::device::roofline;
use crate::engine::StepReport;
use crate::outcome::{trust, StepStatus};
use crate::report::paired;

/// What the result is assembled from: the build and where the candidate's steps are in it.
pub struct Assembly<'a> {
    pub steps: &'a [StepReport],
    /// The candidate's generated pipeline.
    pub pipeline: &'a str,
    /// The workload's folder name.
    pub workload: &'a str,
    pub kernel: &'a Path,
    pub handtuned: Option<HandtunedSource>,
    pub scale: &'a str,
    pub backend: &'a str,
    pub run_id: i64,
    /// The run database, for speedups pooled over re-measurements.
    pub db: Option<&'a Db>,
}

pub fn find<'a>(steps: &'a [StepReport], id: &str) -> Option<&'a StepReport> {
    steps.iter().find(|s| s.step == id)
}

/// The achieved TFLOP/s of a profile result (its FLOPs over its median), computed here: the
/// worker reports FLOPs and times only.
fn tflops(result: &Value) -> Option<Value> {
    let flops = result
        .get("flops")
        .and_then(Value::as_f64)
        .filter(|f| *f > 0.0)?;
    let ms = result.get("median_ms").and_then(Value::as_f64)?;
    roofline::tflops(flops, ms).map(Value::from)
}

fn timing(r: Option<&StepReport>) -> Option<Timing> {
    let r = r?;
    let get = |k: &str| r.result.get(k).cloned();
    Some(if r.status == StepStatus::Ok {
        Timing::Measured(Measured {
            median_ms: r.result.get("median_ms").and_then(Value::as_f64),
            wall_median_ms: r.result.get("wall_median_ms").and_then(Value::as_f64),
            samples: r
                .result
                .get("samples_ms")
                .and_then(Value::as_array)
                .map(Vec::len),
            tflops: tflops(&r.result),
            interpret: get("interpret"),
            step: r.step.clone(),
            key: r.key.clone(),
        })
    } else {
        Timing::Failed {
            status: r.status,
            reasons: get("reasons"),
            step: r.step.clone(),
        }
    })
}

/// How far the candidate's numbers can be trusted: [`trust::derive`] on its steps' results.
fn trust_of(export: Option<&StepReport>, judged: &[Option<&StepReport>]) -> Option<String> {
    let judged: Vec<Option<&Value>> = judged.iter().map(|r| r.map(|r| &r.result)).collect();
    trust::derive(export.map(|e| &e.result), &judged)
}

/// How the candidate's paired measurement went: rounds, what stopped it, the programs' medians.
fn measurement(
    profile: Option<&StepReport>,
    vs_xla: &Option<PairedSpeedup>,
    vs_handtuned: &Option<PairedSpeedup>,
) -> Option<Measurement> {
    let paired = profile.and_then(|p| p.result.get("paired"))?;
    let get = |k: &str| paired.get(k).cloned();
    Some(Measurement {
        rounds: get("rounds"),
        round_iters: get("round_iters"),
        stop: get("stop"),
        elapsed_s: get("elapsed_s"),
        timing_source: get("timing_source"),
        programs: paired.get("programs").and_then(Value::as_array).map(|ps| {
            ps.iter()
                .map(|p| ProgramTiming {
                    role: p.get("role").cloned(),
                    median_ms: p.get("median_ms").cloned(),
                    iqr_rel: p.get("iqr_rel").cloned(),
                    n: p.get("n").cloned(),
                })
                .collect()
        }),
        skipped: get("skipped"),
        vs_xla: vs_xla.clone(),
        vs_handtuned: vs_handtuned.clone(),
    })
}

/// The fields of an export, compile or verify step that explain a failure.
fn detail(r: Option<&StepReport>, fields: &[&str]) -> Option<StageDetail> {
    let r = r?;
    let mut m = Map::new();
    for f in fields {
        if let Some(v) = r.result.get(*f).filter(|v| !v.is_null()) {
            m.insert((*f).to_string(), v.clone());
        }
    }
    Some(StageDetail {
        status: r.status,
        cached: r.cached,
        fields: m,
    })
}

/// The candidate's paired speedup against `role`, pooled over `--remeasure` runs where the
/// database has several.
fn paired_speedup(
    profile: Option<&StepReport>,
    db: Option<&Db>,
    role: &str,
) -> Option<PairedSpeedup> {
    let p = profile.filter(|p| p.status == StepStatus::Ok)?;
    let field = paired::ROLES
        .iter()
        .find(|(r, _)| *r == role)
        .map(|(_, f)| *f)
        .unwrap_or("speedup_vs_xla");
    let this = p.result.get(field).cloned().unwrap_or(Value::Null);
    let pooled = db.and_then(|db| paired::pooled(db, &p.key, role).ok().flatten());
    let best = paired::best_estimate(&p.result, role, pooled.as_ref());
    Some(PairedSpeedup {
        speedup: best.map(|b| b.point),
        ci: best.and_then(|b| b.interval()).map(|(lo, hi)| [lo, hi]),
        this_measurement: this,
        pooled,
    })
}

/// The candidate's status and reasons: an export that failed decides; otherwise the worst of
/// its stages (a profile `rejected` is not `correct`), with the compile error added.
fn status_and_reasons(
    export: Option<&StepReport>,
    compile: Option<&StepReport>,
    verify: Option<&StepReport>,
    profile: Option<&StepReport>,
) -> (StepStatus, Vec<Value>) {
    let failed_export = export.filter(|e| e.status.is_failure());
    let (status, mut reasons) = match failed_export {
        Some(e) => (
            e.status,
            e.result
                .get("reasons")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        ),
        None => overall_status(compile, verify, profile),
    };
    // The error itself (the traceback's tail) of the stage that failed: an export that failed
    // (a syntax error, a missing module, no `workload`), else the compile step's.
    let errored = failed_export.or(compile);
    if let Some(e) = errored
        .and_then(|c| c.result.get("error"))
        .filter(|e| !e.is_null() && e.as_str() != Some(""))
    {
        if status != StepStatus::Correct && !reasons.contains(e) {
            reasons.push(e.clone());
        }
    }
    (status, reasons)
}

/// A path in the candidate's sandbox copy (`/tmp/jb-sandbox-XXXX/candidate/k.py`): the worker
/// saw the copy, the author knows the file.
fn sandbox_copy() -> &'static regex::Regex {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        regex::Regex::new(r#"(?:/[^\s"':/]+)*/jb-sandbox-[A-Za-z0-9_]+/candidate/([^\s"':,)]+)"#)
            .expect("valid regex")
    })
}

/// `v` with every path of the candidate's sandbox copy named as `kernel` (strings inside
/// arrays and objects included); other sandbox files keep their path.
fn unsandboxed(v: &mut Value, kernel: &Path) {
    match v {
        Value::String(s) if s.contains("jb-sandbox-") => {
            let name = kernel.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let shown = kernel.display().to_string();
            let out = sandbox_copy().replace_all(s, |c: &regex::Captures| {
                if &c[1] == name {
                    shown.clone()
                } else {
                    c[0].to_string()
                }
            });
            *s = out.into_owned();
        }
        Value::Array(a) => a.iter_mut().for_each(|x| unsandboxed(x, kernel)),
        Value::Object(o) => o.values_mut().for_each(|x| unsandboxed(x, kernel)),
        _ => {}
    }
}

fn unsandboxed_detail(d: Option<StageDetail>, kernel: &Path) -> Option<StageDetail> {
    d.map(|mut d| {
        d.fields.values_mut().for_each(|v| unsandboxed(v, kernel));
        d
    })
}

/// The speedup reported against one baseline, and its interval: the paired one, capped (and
/// without an interval) when the baseline ran much slower beside the candidate than alone;
/// the ratio of separate measurements where the candidate was not measured paired.
struct Reported {
    speedup: Option<f64>,
    ci: Option<[f64; 2]>,
    slowed: Option<paired::Slowed>,
    unpaired: Option<f64>,
}

fn reported(
    paired_speedup: &Option<PairedSpeedup>,
    profile: Option<&StepReport>,
    role: &str,
    base: &Option<Timing>,
    kernel: &Option<Timing>,
) -> Reported {
    let base_ms = base.as_ref().and_then(Timing::median_ms);
    let kernel_ms = kernel.as_ref().and_then(Timing::median_ms);
    let unpaired = match (base_ms, kernel_ms) {
        (Some(b), Some(k)) if k > 0.0 => Some(b / k),
        _ => None,
    };
    let point = paired_speedup.as_ref().and_then(|p| p.speedup);
    // A baseline much slower beside the candidate than alone: the candidate may have slowed
    // it. The speedup is then capped at the baseline alone over the candidate (never raised).
    let slowed = point.and_then(|point| {
        paired::slowed(
            point,
            profile.and_then(|p| paired::pair_median(&p.result, role)),
            base_ms,
            kernel_ms,
        )
    });
    let (speedup, ci) = match slowed {
        Some(g) => (Some(g.capped), None),
        None => (
            point.or(unpaired),
            paired_speedup.as_ref().and_then(|p| p.ci),
        ),
    };
    Reported {
        speedup,
        ci,
        slowed,
        unpaired,
    }
}

/// The speed-of-light score of a correct candidate: its time and XLA's from the paired
/// measurement where both are there (same process, interleaved), else from their own steps.
fn speed_of_light(
    profile: Option<&StepReport>,
    baseline: &Option<Timing>,
    kernel: &Option<Timing>,
) -> Option<SpeedOfLight> {
    let p = profile?;
    let roofline_ms = p
        .result
        .get("roofline_ms")
        .and_then(Value::as_f64)
        .filter(|r| *r > 0.0)?;
    // In the paired measurement the candidate is the program of role `impl`.
    let paired = paired::pair_median(&p.result, "impl").zip(paired::pair_median(&p.result, "xla"));
    let (times, (candidate_ms, xla_ms)) = match paired {
        Some(both) => ("paired", both),
        None => (
            "separate",
            kernel
                .as_ref()
                .and_then(Timing::median_ms)
                .zip(baseline.as_ref().and_then(Timing::median_ms))?,
        ),
    };
    let score = roofline::sol_score(candidate_ms, roofline_ms, xla_ms);
    let why = score.is_none().then(|| {
        format!(
            "XLA's {xla_ms:.4} ms is not slower than the roofline bound {roofline_ms:.4} ms: the peak is below what this device reaches"
        )
    });
    Some(SpeedOfLight {
        score,
        roofline_ms,
        candidate_ms,
        xla_ms,
        times,
        peak_source: p.result.get("peak_source").cloned(),
        why,
    })
}

impl Assembly<'_> {
    /// The result of the candidate (the `jb eval --json` contract).
    pub fn result(&self) -> EvalResult {
        let steps = self.steps;
        let wl = self.workload;
        let id = |step: &str| format!("{}/{step}[workload={wl}]", self.pipeline);
        let export = find(steps, &id("export"));
        let compile = find(steps, &id("compile"));
        let verify = find(steps, &id("verify"));
        let profile = find(steps, &id("profile"));
        let (status, mut reasons) = status_and_reasons(export, compile, verify, profile);
        reasons.iter_mut().for_each(|r| unsandboxed(r, self.kernel));
        let correct = status == StepStatus::Correct;
        let trust = trust_of(export, &[compile, verify, profile]);
        // A timing from a process that imported the candidate is never a speedup (nor a time).
        let unmeasured = if correct {
            trust::unmeasured_reason(trust.as_deref())
        } else {
            None
        };
        let timed = correct && unmeasured.is_none();
        let baseline = timing(find(steps, &format!("baseline/profile[workload={wl}]")));
        let kernel = if timed { timing(profile) } else { None };
        let handtuned = timing(find(steps, &id("handtuned_profile")));
        let (paired_xla, paired_ht) = if timed {
            (
                paired_speedup(profile, self.db, "xla"),
                paired_speedup(profile, self.db, "handtuned"),
            )
        } else {
            (None, None)
        };
        let xla = reported(&paired_xla, profile, "xla", &baseline, &kernel);
        let sol = if correct {
            speed_of_light(profile, &baseline, &kernel)
        } else {
            None
        };
        let ht = reported(&paired_ht, profile, "handtuned", &handtuned, &kernel);
        let verify_field = |k: &str| verify.and_then(|v| v.result.get(k)).cloned();
        let compile_field = |k: &str| compile.and_then(|c| c.result.get(k)).cloned();
        EvalResult {
            workload: wl.to_string(),
            status,
            reasons,
            correctness: Correctness {
                trials: verify
                    .and_then(|v| v.result.get("trials"))
                    .and_then(Value::as_array)
                    .map(Vec::len),
                seed: verify_field("seed"),
                max_abs_err: verify_field("max_abs_err"),
                max_rel_err: verify_field("max_rel_err"),
                per_trial: verify_field("trials"),
                variants: verify_field("variants"),
            },
            measurement: measurement(profile, &paired_xla, &paired_ht),
            baseline,
            kernel,
            handtuned,
            handtuned_config: self.handtuned,
            speedup_vs_xla: xla.speedup,
            speedup_ci: xla.ci,
            speedup_vs_handtuned: ht.speedup,
            speedup_vs_handtuned_ci: ht.ci,
            baseline_slowed_in_pair: PerRole {
                xla: xla.slowed,
                handtuned: ht.slowed,
            },
            speedup_unpaired: Unpaired {
                vs_xla: xla.unpaired,
                vs_handtuned: ht.unpaired,
            },
            speed_of_light: sol,
            has_pallas_call: compile_field("has_pallas_call"),
            interpret: compile_field("interpret"),
            trust,
            unmeasured,
            export: unsandboxed_detail(
                detail(
                    export,
                    &["programs", "error_class", "error", "reasons", "stderr_tail"],
                ),
                self.kernel,
            ),
            compile: unsandboxed_detail(
                detail(
                    compile,
                    &[
                        "compile_ms",
                        "cost",
                        "memory",
                        "error_class",
                        "error",
                        "reasons",
                        "stderr_tail",
                    ],
                ),
                self.kernel,
            ),
            verify: unsandboxed_detail(
                detail(
                    verify,
                    &[
                        "error_class",
                        "error",
                        "reasons",
                        "notes",
                        "stderr_tail",
                        "recheck",
                        "claimed_status",
                        "tolerance",
                    ],
                ),
                self.kernel,
            ),
            scale: self.scale.to_string(),
            backend: self.backend.to_string(),
            run_id: self.run_id,
            kernel_path: self.kernel.to_path_buf(),
            interrupted: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(step: &str, status: &str, result: Value) -> StepReport {
        StepReport {
            step: step.into(),
            kind: "k".into(),
            status: status.into(),
            cached: false,
            key: format!("key-{step}"),
            duration_ms: 0.0,
            reason: String::new(),
            result,
        }
    }

    fn assembled(steps: &[StepReport]) -> Value {
        let r = Assembly {
            steps,
            pipeline: "jb-eval",
            workload: "12p_RMSNorm",
            kernel: Path::new("/k.py"),
            handtuned: Some(HandtunedSource::Default),
            scale: "tiny",
            backend: "cpu",
            run_id: 7,
            db: None,
        }
        .result();
        serde_json::to_value(r).unwrap()
    }

    /// The speed-of-light score from the paired medians and the profile's roofline bound; none
    /// (with the reason) when XLA is not slower than the bound.
    #[test]
    fn speed_of_light_from_the_paired_medians() {
        let wl = "[workload=12p_RMSNorm]";
        let steps = |roofline_ms: f64| {
            vec![
                report(&format!("jb-eval/export{wl}"), "ok", json!({})),
                report(&format!("jb-eval/compile{wl}"), "ok", json!({})),
                report(
                    &format!("jb-eval/verify{wl}"),
                    "correct",
                    json!({"trials": [{"ok": true}]}),
                ),
                report(
                    &format!("jb-eval/profile{wl}"),
                    "ok",
                    json!({"median_ms": 2.0, "roofline_ms": roofline_ms, "peak_source": "published",
                           "paired": {"programs": [{"role": "impl", "median_ms": 2.0},
                                                   {"role": "xla", "median_ms": 3.0}]}}),
                ),
                report(
                    &format!("baseline/profile{wl}"),
                    "ok",
                    json!({"median_ms": 9.0}),
                ),
            ]
        };
        let v = assembled(&steps(1.0));
        let sol = &v["speed_of_light"];
        assert_eq!(sol["times"], "paired");
        assert_eq!(sol["score"], json!(1.0 / (1.0 + 1.0 / 2.0)));
        assert_eq!(sol["xla_ms"], json!(3.0));
        let v = assembled(&steps(4.0));
        assert_eq!(v["speed_of_light"]["score"], Value::Null);
        assert!(v["speed_of_light"]["why"]
            .as_str()
            .unwrap()
            .contains("roofline bound"));
    }

    /// The `jb eval --json` contract: its fields, in order, and the shape of the timings.
    #[test]
    fn the_json_contract_keeps_its_fields_and_order() {
        let wl = "[workload=12p_RMSNorm]";
        let steps = vec![
            report(
                &format!("jb-eval/export{wl}"),
                "ok",
                json!({"trust": "sandboxed"}),
            ),
            report(
                &format!("jb-eval/compile{wl}"),
                "ok",
                json!({"has_pallas_call": true, "interpret": true, "compile_ms": 3.0, "error": null, "trust": "artifact"}),
            ),
            report(
                &format!("jb-eval/verify{wl}"),
                "correct",
                json!({"trials": [{"ok": true}, {"ok": true}], "seed": 5, "max_abs_err": 0.0, "max_rel_err": 0.0, "trust": "artifact"}),
            ),
            report(
                &format!("jb-eval/profile{wl}"),
                "ok",
                json!({"median_ms": 1.0, "samples_ms": [1.0, 1.0], "trust": "artifact",
                       "speedup_vs_xla": {"point": 2.0, "ci_low": 1.9, "ci_high": 2.1},
                       "paired": {"rounds": 4, "stop": "converged", "programs": [{"role": "candidate", "median_ms": 1.0, "n": 4}]}}),
            ),
            report(
                &format!("baseline/profile{wl}"),
                "ok",
                json!({"median_ms": 2.0, "wall_median_ms": 2.5, "samples_ms": [2.0], "flops": 2e8}),
            ),
            report(
                &format!("jb-eval/handtuned_profile{wl}"),
                "crashed",
                json!({"reasons": ["boom"]}),
            ),
        ];
        let v = assembled(&steps);
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "workload",
                "status",
                "reasons",
                "correctness",
                "baseline",
                "kernel",
                "handtuned",
                "handtuned_config",
                "speedup_vs_xla",
                "speedup_ci",
                "speedup_vs_handtuned",
                "speedup_vs_handtuned_ci",
                "baseline_slowed_in_pair",
                "speedup_unpaired",
                "speed_of_light",
                "measurement",
                "has_pallas_call",
                "interpret",
                "trust",
                "unmeasured",
                "export",
                "compile",
                "verify",
                "scale",
                "backend",
                "run_id",
                "kernel_path"
            ]
        );
        assert_eq!(v["status"], "correct");
        assert_eq!(
            v["correctness"],
            json!({"trials": 2, "seed": 5, "max_abs_err": 0.0, "max_rel_err": 0.0,
                   "per_trial": [{"ok": true}, {"ok": true}], "variants": null})
        );
        assert_eq!(
            v["baseline"],
            json!({"median_ms": 2.0, "wall_median_ms": 2.5, "samples": 1, "tflops": 0.1,
                   "interpret": null, "step": format!("baseline/profile{wl}"),
                   "key": format!("key-baseline/profile{wl}")})
        );
        assert_eq!(
            v["handtuned"],
            json!({"status": "crashed", "reasons": ["boom"], "step": format!("jb-eval/handtuned_profile{wl}")})
        );
        assert_eq!(v["handtuned_config"], "default");
        assert_eq!(v["speedup_vs_xla"], 2.0);
        assert_eq!(v["speedup_ci"], json!([1.9, 2.1]));
        assert_eq!(v["speedup_vs_handtuned"], Value::Null);
        assert_eq!(
            v["baseline_slowed_in_pair"],
            json!({"xla": null, "handtuned": null})
        );
        assert_eq!(
            v["speedup_unpaired"],
            json!({"vs_xla": 2.0, "vs_handtuned": null})
        );
        assert_eq!(v["measurement"]["rounds"], 4);
        assert_eq!(
            v["measurement"]["programs"],
            json!([{"role": "candidate", "median_ms": 1.0, "iqr_rel": null, "n": 4}])
        );
        assert_eq!(v["measurement"]["vs_xla"]["ci"], json!([1.9, 2.1]));
        assert_eq!(v["trust"], "artifact");
        assert_eq!(
            v["compile"],
            json!({"status": "ok", "cached": false, "compile_ms": 3.0})
        );
        assert_eq!(v["kernel_path"], "/k.py");
    }

    /// A correct candidate timed in its own (sandboxed) process: a forged 7x stays out of the
    /// result, which says why it has no speedup; its correctness stands.
    #[test]
    fn a_timing_from_the_candidates_process_is_no_speedup() {
        let wl = "[workload=12p_RMSNorm]";
        let sandboxed = |extra: Value| {
            let mut v = json!({"trust": "sandboxed"});
            v.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            v
        };
        let steps = vec![
            report(
                &format!("jb-eval/export{wl}"),
                "rejected",
                json!({"trust": "sandboxed"}),
            ),
            report(
                &format!("jb-eval/compile{wl}"),
                "ok",
                sandboxed(json!({"has_pallas_call": true})),
            ),
            report(
                &format!("jb-eval/verify{wl}"),
                "correct",
                sandboxed(json!({"trials": [{"ok": true}]})),
            ),
            report(
                &format!("jb-eval/profile{wl}"),
                "ok",
                sandboxed(json!({"median_ms": 0.001, "samples_ms": [0.001],
                       "speedup_vs_xla": {"point": 7.3, "ci_low": 7.2, "ci_high": 7.4}})),
            ),
            report(
                &format!("baseline/profile{wl}"),
                "ok",
                json!({"median_ms": 2.0, "samples_ms": [2.0]}),
            ),
        ];
        // The export "failed" only as far as it could not export (a rejected export decides
        // the status): use an ok export to keep the candidate correct.
        let mut steps = steps;
        steps[0].status = "ok".into();
        let v = assembled(&steps);
        assert_eq!(v["status"], "correct", "{v:#}");
        assert_eq!(v["trust"], "sandboxed");
        for k in [
            "speedup_vs_xla",
            "speedup_ci",
            "speedup_vs_handtuned",
            "kernel",
            "measurement",
        ] {
            assert_eq!(v[k], Value::Null, "{k}: {v:#}");
        }
        assert_eq!(v["speedup_unpaired"]["vs_xla"], Value::Null);
        assert!(v["unmeasured"]
            .as_str()
            .unwrap()
            .contains("trust sandboxed"));
        // The same steps judged on the artifact do get their speedup.
        for s in steps.iter_mut().take(4).skip(1) {
            s.result["trust"] = json!("artifact");
        }
        let v = assembled(&steps);
        assert_eq!(v["speedup_vs_xla"], 7.3);
        assert_eq!(v["unmeasured"], Value::Null);
    }

    /// A syntax error or a missing module fails the export step: its error (the traceback's
    /// tail) is a reason, and the sandbox copy's path is the author's file.
    #[test]
    fn an_export_error_is_a_reason_with_the_authors_path() {
        let wl = "[workload=12p_RMSNorm]";
        let error = "File \"/tmp/jb-sandbox-J2aR6p/candidate/k.py\", line 3\n    return x +\n              ^\nSyntaxError: invalid syntax";
        let steps = vec![
            report(
                &format!("jb-eval/export{wl}"),
                "compile_error",
                json!({"error_class": "import", "error": error, "reasons": []}),
            ),
            report(
                &format!("jb-eval/compile{wl}"),
                "skipped",
                json!({"reasons": ["upstream jb-eval/export[workload=12p_RMSNorm] is compile_error"]}),
            ),
        ];
        let v = assembled(&steps);
        assert_eq!(v["status"], "compile_error");
        let shown =
            "File \"/k.py\", line 3\n    return x +\n              ^\nSyntaxError: invalid syntax";
        assert_eq!(v["reasons"], json!([shown]));
        assert_eq!(v["export"]["error"], shown);
        // Another file of the sandbox keeps its path.
        let mut other = json!("/tmp/jb-sandbox-x1/candidate/helper.py:3");
        unsandboxed(&mut other, Path::new("/src/k.py"));
        assert_eq!(other, "/tmp/jb-sandbox-x1/candidate/helper.py:3");
    }

    #[test]
    fn nothing_evaluated_is_crashed_with_null_parts() {
        let v = assembled(&[]);
        assert_eq!(v["status"], "crashed");
        assert_eq!(v["reasons"], json!(["the candidate was not evaluated"]));
        for k in ["baseline", "kernel", "measurement", "trust", "export"] {
            assert_eq!(v[k], Value::Null, "{k}");
        }
        assert_eq!(v["correctness"]["trials"], Value::Null);
        assert!(v.get("interrupted").is_none());
    }
}
