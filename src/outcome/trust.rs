//! The trust level of a result (`"trust"` in results): how far the candidate's code was kept
//! from the judge that produced it, and the one rule that decides whether a timing may become
//! a speedup (`jb eval`, `jb agent` and `jb report` all ask [`speedup_allowed`]).
//!
//! A number measured in a process that imported the candidate (trust `sandboxed` or
//! `unsandboxed`) is never a speedup: the candidate's own code ran beside the timer and can
//! rewrite what it records (a `gc.callbacks` hook replacing the list of timed rounds, a patched
//! clock). Correctness there is still rechecked from its outputs; only the timing is refused.

use serde_json::Value;

/// The trust level of a result, weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Trust {
    /// The candidate's code ran without the OS sandbox (`--no-sandbox`).
    Unsandboxed,
    /// The candidate's code ran inside the OS sandbox.
    Sandboxed,
    /// Only the exported program ran, in a judge that never imported the candidate.
    Artifact,
}

impl Trust {
    pub fn as_str(self) -> &'static str {
        match self {
            Trust::Unsandboxed => "unsandboxed",
            Trust::Sandboxed => "sandboxed",
            Trust::Artifact => "artifact",
        }
    }

    pub fn parse(s: &str) -> Option<Trust> {
        match s {
            "unsandboxed" => Some(Trust::Unsandboxed),
            "sandboxed" => Some(Trust::Sandboxed),
            "artifact" => Some(Trust::Artifact),
            _ => None,
        }
    }
}

/// Why a candidate's timing is not a speedup: `None` when it may be one (the judge that timed it
/// never imported the candidate: trust `artifact`).
pub fn unmeasured_reason(trust: Option<&str>) -> Option<String> {
    match trust.map(|t| (t, Trust::parse(t))) {
        Some((_, Some(Trust::Artifact))) => None,
        Some((_, Some(Trust::Sandboxed))) => Some(
            "unmeasured: trust sandboxed (the program could not be exported, so it was timed in the \
             candidate's own process, where its code can rewrite the timer's records); correctness \
             was rechecked from its outputs, but no speedup is reported"
                .to_string(),
        ),
        Some((_, Some(Trust::Unsandboxed))) => Some(
            "unmeasured: trust unsandboxed (--no-sandbox: the candidate's code ran unconfined on \
             this host); no speedup is reported"
                .to_string(),
        ),
        Some((t, None)) => Some(format!(
            "unmeasured: unknown trust {t:?}; no speedup is reported"
        )),
        None => Some("unmeasured: the result states no trust; no speedup is reported".to_string()),
    }
}

/// Whether a timing of trust `trust` may be counted as a speedup (only `artifact`).
pub fn speedup_allowed(trust: Option<&str>) -> bool {
    unmeasured_reason(trust).is_none()
}

/// A candidate's trust from its steps' results: the weakest `trust` of its judged steps
/// (compile, verify, profile), weakened by the export step only when that ran unsandboxed (a
/// sandboxed export that produced the judged program is what `artifact` means). When nothing
/// was judged (the export failed) the export's own trust is all there is.
pub fn derive(export: Option<&Value>, judged: &[Option<&Value>]) -> Option<String> {
    let t = |r: &Value| r.get("trust").and_then(Value::as_str).map(str::to_string);
    let judged_trusts: Vec<String> = judged.iter().flatten().filter_map(|r| t(r)).collect();
    if judged_trusts.is_empty() {
        return export.and_then(t);
    }
    let export_trust = export.and_then(t).map(|e| {
        if e == Trust::Unsandboxed.as_str() {
            e
        } else {
            Trust::Artifact.as_str().to_string()
        }
    });
    let all: Vec<String> = judged_trusts.into_iter().chain(export_trust).collect();
    match weakest(all.iter().map(String::as_str)) {
        Some(w) => Some(w.as_str().to_string()),
        // Only names outside the vocabulary: say the first as it is (never upgrade it).
        None => all.into_iter().next(),
    }
}

/// The weakest trust level of a set of results' `trust` fields (`None` when none has one).
pub fn weakest<'a>(trusts: impl IntoIterator<Item = &'a str>) -> Option<Trust> {
    trusts.into_iter().filter_map(Trust::parse).min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weakest_trust() {
        assert_eq!(weakest(["artifact", "sandboxed"]), Some(Trust::Sandboxed));
        assert_eq!(
            weakest(["artifact", "unsandboxed", "sandboxed"]),
            Some(Trust::Unsandboxed)
        );
        assert_eq!(weakest(["artifact"]), Some(Trust::Artifact));
        assert_eq!(weakest(["bogus"]), None);
    }

    #[test]
    fn only_artifact_timings_are_speedups() {
        assert!(speedup_allowed(Some("artifact")));
        for t in [
            Some("sandboxed"),
            Some("unsandboxed"),
            Some("trusted"),
            Some("x"),
            None,
        ] {
            assert!(!speedup_allowed(t), "{t:?}");
            assert!(unmeasured_reason(t).unwrap().starts_with("unmeasured: "));
        }
        assert!(unmeasured_reason(Some("sandboxed"))
            .unwrap()
            .contains("candidate's own process"));
    }

    #[test]
    fn derivation_takes_the_weakest_judged_step() {
        use serde_json::json;
        let (a, s, u) = (
            json!({"trust": "artifact"}),
            json!({"trust": "sandboxed"}),
            json!({"trust": "unsandboxed"}),
        );
        // A sandboxed export whose program the judge ran: artifact.
        assert_eq!(
            derive(Some(&s), &[Some(&a), Some(&a)]).as_deref(),
            Some("artifact")
        );
        // The profile ran in the candidate's process: sandboxed, whatever the others say.
        assert_eq!(
            derive(Some(&s), &[Some(&a), Some(&s)]).as_deref(),
            Some("sandboxed")
        );
        // An unsandboxed export weakens everything judged from it.
        assert_eq!(
            derive(Some(&u), &[Some(&a)]).as_deref(),
            Some("unsandboxed")
        );
        // Nothing judged: the export's own word.
        assert_eq!(
            derive(Some(&s), &[None, None]).as_deref(),
            Some("sandboxed")
        );
        assert_eq!(derive(None, &[None]), None);
        // An unknown name is never upgraded to artifact.
        let bogus = json!({"trust": "bogus"});
        assert_eq!(derive(None, &[Some(&bogus)]).as_deref(), Some("bogus"));
        assert!(!speedup_allowed(derive(None, &[Some(&bogus)]).as_deref()));
    }

    #[test]
    fn names_round_trip() {
        for t in [Trust::Unsandboxed, Trust::Sandboxed, Trust::Artifact] {
            assert_eq!(Trust::parse(t.as_str()), Some(t));
        }
    }
}
