//! A sandboxed verdict, judged again by a process that never imports the candidate.
//!
//! A candidate that could not be exported is verified in a fresh sandboxed worker that imports
//! it: inside that process it can forge its verdict (patch the comparison, overwrite the reference
//! copies, answer for the op). So jb draws the evaluation's seed itself (unless the step replays
//! one), asks that step to write every trial's output to `outputs/` in its out_dir, and, when the
//! step says `correct`, has a pooled trusted worker rebuild the same trials from the seed,
//! recompute the reference and judge those files (`python/jb/ops/recheck.py`). A verdict the files
//! do not bear out becomes the recheck's (`incorrect`, or `rejected` when outputs are missing).
//! The files are removed afterwards (not kept in the cache).

use std::io::Read;
use std::path::Path;

use serde_json::{json, Map, Value};

use super::StepOutput;
use crate::outcome::status::StepStatus;

/// The folder of the dumped outputs inside the step's out_dir.
pub const OUTPUTS_DIR: &str = "outputs";

/// A seed from OS randomness (63 bits, as the Python side draws them).
pub fn draw_seed() -> std::io::Result<u64> {
    let mut b = [0u8; 8];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b) >> 1)
}

/// Prepare a sandboxed verify request: jb's seed (unless given) and outputs written to files.
pub fn prepare(args: &mut Map<String, Value>) -> std::io::Result<()> {
    if args.get("seed").is_none_or(Value::is_null) {
        args.insert("seed".into(), json!(draw_seed()?));
    }
    args.insert("dump_outputs".into(), json!(true));
    Ok(())
}

/// The recheck op's request for a verify step's args (after `prepare`).
pub fn request(args: &Map<String, Value>, out_dir: &Path) -> Value {
    let mut r = Map::new();
    for k in [
        "workload",
        "scale",
        "backend",
        "project_root",
        "seed",
        "trials",
        "variants",
        "impl",
    ] {
        if let Some(v) = args.get(k) {
            r.insert(k.into(), v.clone());
        }
    }
    r.insert("outputs_dir".into(), json!(out_dir));
    Value::Object(r)
}

/// Fold the recheck into the sandboxed step's output: a verdict it does not bear out is
/// replaced; a recheck that could not run leaves the step an infrastructure error.
pub fn apply(out: &mut StepOutput, recheck: StepOutput) {
    let summary = json!({
        "status": recheck.status.as_str(),
        "reasons": recheck.result.get("reasons").cloned().unwrap_or(json!([])),
    });
    if recheck.infra
        || !matches!(
            recheck.status,
            StepStatus::Correct | StepStatus::Incorrect | StepStatus::Rejected
        )
    {
        let claimed = out.result.clone();
        let why = recheck
            .result
            .get("reasons")
            .and_then(Value::as_array)
            .and_then(|r| r.first())
            .and_then(Value::as_str)
            .unwrap_or("no answer")
            .to_string();
        *out = StepOutput::infra(
            "error",
            format!("the judge could not recheck the sandboxed verdict: {why}"),
        );
        if let Value::Object(m) = &mut out.result {
            m.insert("claimed".into(), claimed);
        }
        return;
    }
    let held = recheck.status == StepStatus::Correct;
    if let Value::Object(m) = &mut out.result {
        m.insert("recheck".into(), summary);
        if !held {
            let mut reasons: Vec<Value> = recheck
                .result
                .get("reasons")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(|r| match r.as_str() {
                    Some(s) => json!(format!("judge's recheck of the sandboxed outputs: {s}")),
                    None => r,
                })
                .collect();
            reasons.extend(
                m.get("reasons")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
            );
            m.insert("reasons".into(), Value::Array(reasons));
            m.insert("status".into(), json!(recheck.status.as_str()));
            m.insert("claimed_status".into(), json!(out.status.as_str()));
        }
    }
    if !held {
        out.status = recheck.status;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepare_draws_a_seed_unless_given() {
        let mut a = Map::new();
        prepare(&mut a).unwrap();
        let mut b = Map::new();
        prepare(&mut b).unwrap();
        assert_ne!(a["seed"], b["seed"]);
        assert!(a["seed"].as_u64().unwrap() < 1 << 63);
        assert_eq!(a["dump_outputs"], true);
        let mut given = Map::from_iter([("seed".to_string(), json!(7))]);
        prepare(&mut given).unwrap();
        assert_eq!(given["seed"], 7);
    }

    #[test]
    fn a_verdict_the_outputs_do_not_bear_out_is_replaced() {
        let mut out = StepOutput::new("correct", json!({"reasons": [], "trials": []}));
        apply(
            &mut out,
            StepOutput::new(
                "incorrect",
                json!({"reasons": ["trial seed=1 dist=normal: off"]}),
            ),
        );
        assert_eq!(out.status, StepStatus::Incorrect);
        assert_eq!(out.result["status"], "incorrect");
        assert_eq!(out.result["claimed_status"], "correct");
        assert!(out.result["reasons"][0]
            .as_str()
            .unwrap()
            .starts_with("judge's recheck"));

        let mut ok = StepOutput::new("correct", json!({"reasons": []}));
        apply(&mut ok, StepOutput::new("correct", json!({"reasons": []})));
        assert_eq!(ok.status, StepStatus::Correct);
        assert_eq!(ok.result["recheck"]["status"], "correct");

        let mut lost = StepOutput::new("correct", json!({}));
        apply(&mut lost, StepOutput::infra("crashed", "worker died"));
        assert_eq!(lost.status, StepStatus::Error);
        assert!(lost.infra);
    }
}
