//! Reproducible archives of results: `jb archive create | verify | import`.
//!
//! An archive is a tar stream compressed with zstd (content checksum on). Entries are sorted by
//! path with fixed metadata (mode 0644, uid/gid 0, no owner names, mtime 0), so the same results
//! give a byte-identical file:
//!
//! ```text
//! MANIFEST.json            format, jb version, environments, pipelines, keys, every entry's digest
//! MANIFEST.sig             optional: ed25519 signature of MANIFEST.json (`create --sign KEY`)
//! blobs/<blake3>           CAS blobs the records name (traces, step files)
//! latest.json              the latest key of every step (with its key components)
//! pipelines/<name>.yaml    the project's pipelines
//! records/<key>.json       action records with their measurement samples
//! runs.json                the runs those samples were measured in
//! sources/<path>           input files named by the records' keys, as they were hashed
//!                          (candidate sources, workloads, baselines); `sources/_abs/...` for
//!                          files outside the project
//! tables/<name>.json       extension tables of the run database: columns (names and types
//!                          from a fixed set), primary key, rows (sorted); never SQL
//! ```
//!
//! Reading checks every entry on its own before anything is allocated for it (see
//! [`tarball::for_each_entry`] and [`entry::classify`]): regular files only, known paths only,
//! sizes within the limit of their kind. Import never overwrites what a cache already holds.

pub mod create;
pub mod entry;
pub mod import;
pub mod manifest;
pub mod report;
pub mod rows;
pub mod sign;
pub mod tarball;
pub mod verify;

use std::path::PathBuf;

pub use create::{create, CreateOptions, CreateSummary};
pub use import::{import, ImportOptions, ImportSummary};
pub use manifest::Manifest;
pub use verify::{verify, Verified, VerifyOptions};

use crate::error::{exit, JbError};

/// The format tag in every manifest.
/// Format 2: tables as validated column lists, measurement digests, optional signature.
pub const FORMAT: &str = "jb-archive/2";
pub const SIGNATURE: &str = "MANIFEST.sig";
pub const MANIFEST: &str = "MANIFEST.json";

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}: no such archive")]
    NotFound(PathBuf),
    #[error(transparent)]
    Cache(#[from] JbError),
    #[error("database: {0}")]
    Db(#[from] rusqlite::Error),
    #[error("{entry}: {source}")]
    Json {
        entry: String,
        #[source]
        source: serde_json::Error,
    },
    /// The file is not a readable archive (corrupt compression or tar stream).
    #[error("{path}: not a readable jb archive: {message}")]
    Unreadable { path: PathBuf, message: String },
    /// The archive reads, but its content does not match its manifest.
    #[error("{path}: not a valid jb archive: {}{}", .problems.first().map(String::as_str).unwrap_or("?"), if .problems.len() > 1 { format!(" (and {} more problem(s)):\n  {}", .problems.len() - 1, .problems[1..].join("\n  ")) } else { String::new() })]
    Invalid {
        path: PathBuf,
        problems: Vec<String>,
    },
    /// Importing would overwrite what the cache holds: nothing was written.
    #[error("{path}: {} conflict(s) with {}; nothing was imported:\n  {}", .problems.len(), .cache.display(), .problems.join("\n  "))]
    Conflict {
        path: PathBuf,
        cache: PathBuf,
        problems: Vec<String>,
    },
    /// A key file that cannot be used.
    #[error("{path}: {message}")]
    Key { path: PathBuf, message: String },
    #[error("{0}")]
    Other(String),
}

impl ArchiveError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ArchiveError::Io {
            path: path.into(),
            source,
        }
    }

    pub fn json(entry: impl Into<String>, source: serde_json::Error) -> Self {
        ArchiveError::Json {
            entry: entry.into(),
            source,
        }
    }

    /// 1 for an archive that fails verification or conflicts with the cache, 2 for a missing
    /// file or an unusable key, 3 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            ArchiveError::Unreadable { .. }
            | ArchiveError::Invalid { .. }
            | ArchiveError::Conflict { .. } => exit::FAILED,
            ArchiveError::NotFound(_) | ArchiveError::Key { .. } => exit::USAGE,
            ArchiveError::Cache(e) => e.exit_code(),
            _ => exit::INTERNAL,
        }
    }
}
