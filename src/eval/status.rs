//! An evaluation's status and reasons from its stages' statuses.

use serde_json::{json, Value};

use crate::engine::StepReport;
use crate::outcome::StepStatus;

/// How bad a candidate's stage status is (0: passed; higher is worse); `None` for statuses that
/// are not the candidate's doing (a step skipped because another failed, unsupported, invalid).
fn severity(status: StepStatus) -> Option<u8> {
    Some(match status {
        StepStatus::Ok | StepStatus::Correct => 0,
        StepStatus::Incorrect => 1,
        StepStatus::RuntimeError | StepStatus::Timeout | StepStatus::Crashed => 2,
        StepStatus::CompileError => 3,
        StepStatus::Rejected => 4,
        _ => return None,
    })
}

/// A step's reasons, each prefixed with `prefix: ` when a prefix is given.
pub fn reasons_of(r: &StepReport, prefix: &str) -> Vec<Value> {
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
}

/// The evaluation's status and reasons: the worst status of compile, verify and profile (the
/// earliest stage on a tie), `crashed` when verify never ran. Reasons of a later stage are
/// prefixed with its name.
pub fn overall_status(
    compile: Option<&StepReport>,
    verify: Option<&StepReport>,
    profile: Option<&StepReport>,
) -> (StepStatus, Vec<Value>) {
    let mut worst: Option<(u8, &StepReport, &str)> = None;
    for (r, prefix) in [(compile, ""), (verify, ""), (profile, "profile")] {
        let Some(r) = r else { continue };
        let Some(rank) = severity(r.status) else {
            continue;
        };
        if worst.is_none_or(|(w, _, _)| rank > w) {
            worst = Some((rank, r, prefix));
        }
    }
    match (worst, verify) {
        (Some((rank, r, prefix)), _) if rank > 0 => (r.status, reasons_of(r, prefix)),
        (_, Some(v)) => (v.status, reasons_of(v, "")),
        _ => (
            StepStatus::Crashed,
            vec![json!("the candidate was not evaluated")],
        ),
    }
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
        let outcome = crate::agent::accounting::Outcome::of_eval(
            status.as_str(),
            Some(3.0),
            Some("artifact"),
        );
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
