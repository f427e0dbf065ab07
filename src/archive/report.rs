//! What `jb archive ... --json` prints: the summaries of create and verify with the fields the
//! command adds, a new key pair, and a failure's problems.

use std::path::PathBuf;

use serde::Serialize;

use super::{ArchiveError, CreateSummary, Verified};

/// `jb archive create --json`: the summary, then how long it took.
#[derive(Debug, Clone, Serialize)]
pub struct Created {
    #[serde(flatten)]
    pub summary: CreateSummary,
    pub seconds: f64,
}

/// `jb archive verify --json` on success: what was checked, then `ok: true`.
#[derive(Debug, Clone, Serialize)]
pub struct VerifiedOk {
    #[serde(flatten)]
    pub verified: Verified,
    /// Always true (a failure is a [`Failure`]).
    pub ok: bool,
}

impl From<Verified> for VerifiedOk {
    fn from(verified: Verified) -> Self {
        VerifiedOk { verified, ok: true }
    }
}

/// `jb archive keygen --json`: the files written and the key's fingerprint.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KeyPairWritten {
    pub secret_key: PathBuf,
    pub public_key: PathBuf,
    pub fingerprint: String,
    pub comment: String,
}

/// Any archive command's `--json` on failure: `ok: false` and what is wrong.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Failure {
    /// Always false.
    pub ok: bool,
    pub problems: Vec<String>,
}

impl From<&ArchiveError> for Failure {
    fn from(e: &ArchiveError) -> Self {
        let problems = match e {
            ArchiveError::Invalid { problems, .. } | ArchiveError::Conflict { problems, .. } => {
                problems.clone()
            }
            other => vec![other.to_string()],
        };
        Failure {
            ok: false,
            problems,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::verify::SignedBy;

    #[test]
    fn created_is_the_summary_then_seconds() {
        let c = Created {
            summary: CreateSummary {
                path: "/a.tar.zst".into(),
                bytes: 10,
                uncompressed_bytes: 20,
                records: 1,
                blobs: 2,
                blob_bytes: 3,
                sources: 4,
                pipelines: 5,
                tables: 6,
                missing_blobs: vec![],
                stale_sources: vec!["s.py".into()],
                signed_by: None,
            },
            seconds: 0.5,
        };
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"path":"/a.tar.zst","bytes":10,"uncompressed_bytes":20,"records":1,"blobs":2,"blob_bytes":3,"sources":4,"pipelines":5,"tables":6,"missing_blobs":[],"stale_sources":["s.py"],"signed_by":null,"seconds":0.5}"#
        );
    }

    #[test]
    fn verified_is_the_summary_then_ok() {
        let v = VerifiedOk::from(Verified {
            path: "/a".into(),
            jb_version: "0.1.0".into(),
            entries: 3,
            records: 1,
            blobs: 1,
            sources: 0,
            bytes: 99,
            signature: Some(SignedBy {
                fingerprint: "SHA256:x".into(),
                comment: "me".into(),
                trusted: false,
            }),
        });
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"path":"/a","jb_version":"0.1.0","entries":3,"records":1,"blobs":1,"sources":0,"bytes":99,"signature":{"fingerprint":"SHA256:x","comment":"me","trusted":false},"ok":true}"#
        );
    }

    #[test]
    fn keygen_and_failure_keys_in_order() {
        let k = KeyPairWritten {
            secret_key: "k".into(),
            public_key: "k.pub".into(),
            fingerprint: "SHA256:x".into(),
            comment: "c".into(),
        };
        assert_eq!(
            serde_json::to_string(&k).unwrap(),
            r#"{"secret_key":"k","public_key":"k.pub","fingerprint":"SHA256:x","comment":"c"}"#
        );
        let f = Failure::from(&ArchiveError::NotFound("/x".into()));
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"ok":false,"problems":["/x: no such archive"]}"#
        );
    }
}
