//! An evaluation (the `jb eval` result JSON of a candidate) turned into what the methods need:
//! the sample's outcome and speedup, the feedback for the next prompt (the runner's output for a
//! failure) and a profile summary for a correct kernel.

use std::fmt::Write;

use serde_json::Value;

use super::accounting::Outcome;
use super::hardware::Device;
use super::prompt::{last_lines, Feedback, OUTPUT_LINES};

/// One evaluated candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    pub outcome: Outcome,
    /// `jb eval`'s status (`correct`, `incorrect`, `compile_error`, ...).
    pub status: String,
    pub speedup: Option<f64>,
    pub kernel_ms: Option<f64>,
    pub xla_ms: Option<f64>,
    pub feedback: Feedback,
    pub profile: Option<String>,
}

fn text_of(v: &Value) -> String {
    v.as_str()
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string())
}

/// What the runner said about a candidate, as lines of output: statuses, errors with their
/// tracebacks, verification reasons and failed trials, and the worker's stderr.
pub fn runner_output(eval: &Value) -> String {
    let mut out = String::new();
    for stage in ["export", "compile", "verify"] {
        let d = &eval[stage];
        // A skipped stage (an earlier one failed) says only that: the earlier one's error is
        // what the author needs.
        if d.is_null() || d["status"] == "skipped" || (stage == "export" && d["status"] == "ok") {
            continue;
        }
        let _ = writeln!(
            out,
            "[{stage}] status: {}",
            d["status"].as_str().unwrap_or("?")
        );
        if let Some(e) = d.get("error").filter(|e| !e.is_null()) {
            let class = d["error_class"].as_str().unwrap_or("error");
            let _ = writeln!(out, "[{stage}] {class}:\n{}", text_of(e).trim_end());
        }
        for r in d["reasons"].as_array().into_iter().flatten() {
            let _ = writeln!(out, "[{stage}] {}", text_of(r));
        }
        for n in d["notes"].as_array().into_iter().flatten() {
            let _ = writeln!(out, "[{stage}] note: {}", text_of(n));
        }
        if let Some(t) = d["stderr_tail"].as_str().filter(|t| !t.trim().is_empty()) {
            let _ = writeln!(out, "[{stage}] worker stderr:\n{}", t.trim_end());
        }
    }
    for t in eval["correctness"]["per_trial"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if t["ok"] == false {
            let _ = writeln!(
                out,
                "[verify] trial seed={} dist={}: max_abs_err={} max_rel_err={} {}",
                t["seed"],
                t["dist"].as_str().unwrap_or("?"),
                t["max_abs_err"],
                t["max_rel_err"],
                t["reason"].as_str().unwrap_or("")
            );
        }
    }
    if out.is_empty() {
        for r in eval["reasons"].as_array().into_iter().flatten() {
            let _ = writeln!(out, "{}", text_of(r));
        }
    }
    let _ = writeln!(
        out,
        "status: {}",
        eval["status"].as_str().unwrap_or("unknown")
    );
    last_lines(&out, OUTPUT_LINES)
}

fn fmt_count(x: f64) -> String {
    let (v, unit) = if x >= 1e12 {
        (x / 1e12, "T")
    } else if x >= 1e9 {
        (x / 1e9, "G")
    } else if x >= 1e6 {
        (x / 1e6, "M")
    } else if x >= 1e3 {
        (x / 1e3, "k")
    } else {
        (x, "")
    };
    format!("{v:.3} {unit}")
}

/// What the compiled program costs (XLA cost analysis: FLOPs, bytes, arithmetic intensity)
/// and, where the device's peaks are known, its roofline bound and how close `median_ms` (when
/// given) comes to it. One line, without a leading dash; `None` without a cost analysis.
pub fn cost_summary(eval: &Value, device: &Device, median_ms: Option<f64>) -> Option<String> {
    let cost = &eval["compile"]["cost"];
    let f = cost["flops"].as_f64().filter(|f| *f > 0.0)?;
    let b = cost["bytes_accessed"].as_f64().filter(|b| *b > 0.0)?;
    let intensity = f / b;
    let mut s = format!(
        "compiled program (XLA cost analysis): {}FLOP, {}B accessed, arithmetic intensity {intensity:.2} FLOP/byte",
        fmt_count(f),
        fmt_count(b)
    );
    if let (Some(peak), Some(bw), Some(ridge)) =
        (device.bf16_tflops, device.hbm_gbps, device.ridge_point())
    {
        let bound_ms = (f / (peak * 1e12)).max(b / (bw * 1e9)) * 1e3;
        let _ = write!(
            s,
            "; {} on this device; roofline lower bound {bound_ms:.4} ms",
            if intensity < ridge {
                "memory-bound"
            } else {
                "compute-bound"
            },
        );
        if let Some(median) = median_ms {
            let _ = write!(
                s,
                ", the kernel reaches {:.1}% of it",
                100.0 * bound_ms / median
            );
        }
    }
    Some(s)
}

/// When the "baseline slowed" guard fired (XLA ran slower beside the candidate than alone,
/// machine noise), what that did to the speedup: the reader must not take it for the kernel's.
pub fn slowed_note(eval: &Value) -> Option<String> {
    let g = &eval["baseline_slowed_in_pair"]["xla"];
    let ratio = g["ratio"].as_f64()?;
    let capped = g["capped"].as_f64()?;
    Some(format!(
        "note: XLA ran {ratio:.2}x slower beside the candidate than alone (machine noise): the speedup is capped at {capped:.3}x (XLA alone over the candidate beside it), with no interval"
    ))
}

/// A profile summary of a correct candidate: its timing against XLA's, what the compiled
/// program costs (FLOPs, bytes, arithmetic intensity) and how close it is to the device's
/// roofline.
pub fn profile_summary(eval: &Value, device: &Device) -> Option<String> {
    let k = &eval["kernel"];
    let median = k["median_ms"].as_f64()?;
    let mut s = String::new();
    let _ = write!(s, "- candidate: median device time {median:.4} ms");
    if let Some(n) = k["samples"].as_u64() {
        let _ = write!(s, " over {n} timed iterations");
    }
    if let Some(w) = k["wall_median_ms"].as_f64() {
        let _ = write!(s, " (host wall clock {w:.4} ms)");
    }
    s.push('\n');
    if let Some(x) = eval["baseline"]["median_ms"].as_f64() {
        let _ = writeln!(s, "- XLA reference: median device time {x:.4} ms");
    }
    if let Some(t) = k["tflops"].as_f64() {
        let _ = writeln!(s, "- achieved throughput: {t:.3} TFLOP/s");
    }
    if let Some(note) = slowed_note(eval) {
        let _ = writeln!(s, "- {note}");
    }
    if let Some(c) = cost_summary(eval, device, Some(median)) {
        let _ = writeln!(s, "- {c}");
    }
    if let Some(m) = eval["compile"]["memory"].as_object() {
        let mib = |k: &str| {
            m.get(k)
                .and_then(Value::as_f64)
                .map(|b| b / (1 << 20) as f64)
        };
        if let Some(t) = mib("temp_size_in_bytes").or_else(|| mib("temp_bytes")) {
            let _ = writeln!(s, "- temporary buffers: {t:.2} MiB");
        }
    }
    if eval["interpret"] == true {
        let _ = writeln!(
            s,
            "- Pallas ran in interpret mode: these times measure the interpreter, not an accelerator"
        );
    }
    Some(s.trim_end().to_string())
}

/// The evaluation of one candidate from its result JSON.
pub fn evaluation(eval: &Value, device: &Device) -> Evaluation {
    let status = eval["status"].as_str().unwrap_or("crashed").to_string();
    let trust = eval["trust"].as_str();
    // Only a timing the judge took without the candidate counts (the result already leaves
    // the others out; an older or forged result is held to the same rule here).
    let timed = crate::outcome::trust::speedup_allowed(trust);
    let speedup = eval["speedup_vs_xla"].as_f64().filter(|_| timed);
    let outcome = Outcome::of_eval(&status, speedup, trust);
    let kernel_ms = eval["kernel"]["median_ms"].as_f64().filter(|_| timed);
    let xla_ms = eval["baseline"]["median_ms"].as_f64();
    let (feedback, profile) = if outcome.is_correct() {
        (
            Feedback::Correct {
                latency_ms: kernel_ms,
                xla_ms,
                speedup,
                interpret: eval["interpret"] == true,
            },
            profile_summary(eval, device),
        )
    } else {
        (
            Feedback::Failed {
                outcome: outcome.as_str().to_string(),
                output: runner_output(eval),
            },
            None,
        )
    };
    Evaluation {
        outcome,
        status,
        speedup,
        kernel_ms,
        xla_ms,
        feedback,
        profile,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::hardware::by_id;
    use serde_json::json;

    #[test]
    fn correct_candidate_gets_profile() {
        let e = json!({
            "status": "correct",
            "speedup_vs_xla": 2.0,
            "kernel": {"median_ms": 1.0, "samples": 50, "tflops": 100.0},
            "baseline": {"median_ms": 2.0},
            "compile": {"status": "ok", "cost": {"flops": 1.0e11, "bytes_accessed": 1.0e9}, "memory": {"temp_size_in_bytes": 2097152}},
            "interpret": false,
            "trust": "artifact",
        });
        let ev = evaluation(&e, by_id("tpu-v6e").unwrap());
        assert_eq!(ev.outcome, Outcome::CorrectFaster);
        assert_eq!(ev.kernel_ms, Some(1.0));
        let p = ev.profile.unwrap();
        assert!(p.contains("1.0000 ms over 50 timed iterations"), "{p}");
        assert!(p.contains("XLA reference: median device time 2.0000 ms"));
        assert!(p.contains("arithmetic intensity 100.00 FLOP/byte; memory-bound"));
        assert!(p.contains("temporary buffers: 2.00 MiB"));
        match ev.feedback {
            Feedback::Correct { speedup, .. } => assert_eq!(speedup, Some(2.0)),
            f => panic!("{f:?}"),
        }
    }

    /// A result whose numbers came from the candidate's own process (or that states no
    /// trust) gives no speedup and no latency, even if it carries them.
    #[test]
    fn a_sandboxed_timing_is_no_speedup() {
        for trust in [json!("sandboxed"), json!("unsandboxed"), Value::Null] {
            let e = json!({
                "status": "correct", "speedup_vs_xla": 7.3, "trust": trust,
                "kernel": {"median_ms": 0.001}, "baseline": {"median_ms": 2.0},
            });
            let ev = evaluation(&e, by_id("cpu").unwrap());
            assert_eq!(ev.outcome, Outcome::CorrectUnmeasured, "{trust}");
            assert_eq!((ev.speedup, ev.kernel_ms), (None, None));
        }
    }

    #[test]
    fn failure_gets_the_runner_output() {
        let tb: String = (0..80).map(|i| format!("  frame {i}\n")).collect();
        let e = json!({
            "status": "compile_error",
            "reasons": [],
            "compile": {"status": "compile_error", "error_class": "lowering", "error": format!("Traceback:\n{tb}ValueError: block shape (7, 100) not divisible")},
            "verify": {"status": "skipped", "reasons": ["upstream jb-eval/compile is compile_error"]},
            "correctness": {"per_trial": null},
        });
        let ev = evaluation(&e, by_id("cpu").unwrap());
        assert_eq!(ev.outcome, Outcome::CompileError);
        assert!(ev.profile.is_none());
        match &ev.feedback {
            Feedback::Failed { outcome, output } => {
                assert_eq!(outcome, "compile_error");
                assert!(output.contains("ValueError: block shape"));
                assert!(output.lines().count() <= OUTPUT_LINES);
                assert!(output.ends_with("status: compile_error"));
            }
            f => panic!("{f:?}"),
        }
        let wrong = json!({
            "status": "incorrect",
            "verify": {"status": "incorrect", "reasons": ["trial seed=1 dist=normal: values differ"]},
            "correctness": {"per_trial": [{"seed": 1, "dist": "normal", "ok": false, "max_abs_err": 3.5, "max_rel_err": 1.0, "reason": "values differ"}]},
        });
        let out = runner_output(&wrong);
        assert!(out.contains("max_abs_err=3.5"), "{out}");
    }

    /// A syntax error fails the export step: the agent reads the error, not only "upstream
    /// export is compile_error".
    #[test]
    fn an_export_error_reaches_the_agent() {
        let e = json!({
            "status": "compile_error",
            "reasons": ["File \"k.py\", line 3\nSyntaxError: invalid syntax"],
            "export": {"status": "compile_error", "error_class": "import", "error": "File \"k.py\", line 3\nSyntaxError: invalid syntax", "reasons": []},
            "compile": {"status": "skipped", "reasons": ["upstream jb-eval/export[workload=w] is compile_error"]},
            "verify": {"status": "skipped", "reasons": ["upstream jb-eval/export[workload=w] is compile_error"]},
            "correctness": {"per_trial": null},
        });
        let out = runner_output(&e);
        assert_eq!(
            out,
            "[export] status: compile_error\n[export] import:\nFile \"k.py\", line 3\nSyntaxError: invalid syntax\nstatus: compile_error"
        );
    }
}
