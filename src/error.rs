//! The typed errors of the jb library, each with the process exit code it maps to.

use std::path::PathBuf;

/// Exit codes of the `jb` binary (the stable command-line contract).
pub mod exit {
    pub const OK: i32 = 0;
    /// A step failed, or a candidate is not correct.
    pub const FAILED: i32 = 1;
    /// Bad usage or a bad pipeline.
    pub const USAGE: i32 = 2;
    /// Internal or infrastructure error.
    pub const INTERNAL: i32 = 3;
}

/// Where in a file something is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.file.display(), self.line, self.column)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum JbError {
    /// A pipeline file is malformed or inconsistent; `at` names file, line and column.
    #[error("{at}: {message}")]
    Pipeline { at: Location, message: String },
    #[error("{0}")]
    Usage(String),
    #[error("no project found: no `pipelines/` folder in {0} or any parent (use --project DIR)")]
    NoProject(PathBuf),
    #[error("cache: {0}")]
    Cache(String),
    #[error("database: {0}")]
    Db(#[from] rusqlite::Error),
    #[error("python environment: {0}")]
    PythonEnv(String),
    #[error("worker: {0}")]
    Worker(String),
    #[error("interrupted")]
    Interrupted,
    /// The Ray cluster of `--executor ray` could not be used (the message names its address).
    #[error("ray: {0}")]
    Cluster(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl JbError {
    pub fn exit_code(&self) -> i32 {
        match self {
            JbError::Pipeline { .. } | JbError::Usage(_) | JbError::NoProject(_) => exit::USAGE,
            _ => exit::INTERNAL,
        }
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        JbError::Io {
            path: path.into(),
            source,
        }
    }

    pub fn pipeline(
        file: impl Into<PathBuf>,
        line: usize,
        column: usize,
        message: impl Into<String>,
    ) -> Self {
        JbError::Pipeline {
            at: Location {
                file: file.into(),
                line,
                column,
            },
            message: message.into(),
        }
    }
}

pub type Result<T, E = JbError> = std::result::Result<T, E>;
