//! The typed errors of the jb library, each with the process exit code it maps to.

use std::path::PathBuf;

use crate::pipeline::error::{PipelineError, PipelineErrorKind};
use crate::pipeline::span::Span;

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

/// Where in a file something is. Line 0: no position (a generated pipeline, named
/// `<generator>`), shown as the file alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            return write!(f, "{}", self.file.display());
        }
        write!(f, "{}:{}:{}", self.file.display(), self.line, self.column)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum JbError {
    /// A pipeline file (or another YAML file jb reads) is malformed or inconsistent; the error
    /// names file, line and column.
    #[error(transparent)]
    Pipeline(Box<PipelineError>),
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
            JbError::Pipeline(_) | JbError::Usage(_) | JbError::NoProject(_) => exit::USAGE,
            _ => exit::INTERNAL,
        }
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        JbError::Io {
            path: path.into(),
            source,
        }
    }

    /// A pipeline error of no particular kind at `line` and `column` (1-based) of `file`.
    pub fn pipeline(
        file: impl Into<PathBuf>,
        line: usize,
        column: usize,
        message: impl Into<String>,
    ) -> Self {
        let span = Span {
            offset: 0,
            len: 0,
            line,
            column,
        };
        PipelineError::new(file, span, PipelineErrorKind::Invalid(message.into())).into()
    }

    /// The pipeline error this is, if it is one.
    pub fn as_pipeline(&self) -> Option<&PipelineError> {
        match self {
            JbError::Pipeline(p) => Some(p),
            _ => None,
        }
    }
}

impl From<PipelineError> for JbError {
    fn from(e: PipelineError) -> Self {
        JbError::Pipeline(Box::new(e))
    }
}

pub type Result<T, E = JbError> = std::result::Result<T, E>;
