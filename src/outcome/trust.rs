//! The trust level of a result (`"trust"` in results): how far the candidate's code was kept
//! from the judge that produced it.

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
    fn names_round_trip() {
        for t in [Trust::Unsandboxed, Trust::Sandboxed, Trust::Artifact] {
            assert_eq!(Trust::parse(t.as_str()), Some(t));
        }
    }
}
