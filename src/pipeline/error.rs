//! What can be wrong with a pipeline file, typed: each kind says what, the error says where
//! (file and span) and keeps the text it was found in, for drawing it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::span::Span;
use super::tree::{Seg, SpanTree};
use crate::error::Location;

/// The kinds of pipeline error. The message (`Display`) is the one-line text after
/// `file:line:col: `; [`PipelineErrorKind::label`] and [`PipelineErrorKind::help`] add to the
/// drawing on a terminal.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PipelineErrorKind {
    /// Not YAML.
    #[error("{0}")]
    Syntax(String),
    #[error("duplicate key `{0}`")]
    DuplicateKey(String),
    /// A key the schema does not have (the message lists those it has).
    #[error("{0}")]
    UnknownField(String),
    /// A value that is not one of the names allowed (a step `kind`, a `cache` policy).
    #[error("{0}")]
    UnknownVariant(String),
    #[error("{0}")]
    WrongType(String),
    #[error("{0}")]
    MissingField(String),
    #[error("the file is not UTF-8 text (byte 0x{byte:02x} at offset {offset}); save it as UTF-8")]
    NotUtf8 { byte: u8, offset: usize },
    #[error("nested deeper than {max} levels ({depth} here): pipelines are not that deep; refused before parsing")]
    TooDeep { max: usize, depth: usize },
    #[error("invalid pipeline name `{0}`: use letters, digits, `-` and `_`")]
    InvalidPipelineName(String),
    #[error("pipeline name `{name}` is also used by {}", other.display())]
    DuplicatePipelineName { name: String, other: PathBuf },
    #[error("a pipeline needs at least one step")]
    NoSteps,
    #[error("allow_outside: `{0}` is not an absolute path without `..`")]
    AllowOutside(String),
    #[error("invalid step name `{0}`: use letters, digits, `-` and `_`")]
    InvalidStepName(String),
    #[error("step `{0}`: a `command` step needs `run`")]
    CommandNeedsRun(String),
    #[error("step `{0}`: `run` is only for `command` steps")]
    RunNotForKind(String),
    #[error("step `{0}`: timeout must be a positive number of seconds")]
    BadTimeout(String),
    /// A `foreach` entry that cannot be expanded.
    #[error("step `{step}`: {message}")]
    Foreach { step: String, message: String },
    #[error("step `{step}` needs `{target}`, which does not exist")]
    UnknownStep { step: String, target: String },
    /// Steps (`pipeline/step`, sorted) that need each other.
    #[error("dependency cycle: {}", .0.join(" -> "))]
    Cycle(Vec<String>),
    #[error("step `{step}`: pattern `{pattern}` matches nothing (add `allow_empty: true` if that is expected)")]
    GlobMatchesNothing { step: String, pattern: String },
    #[error("step `{step}`: input `{input}` matches no file")]
    InputMatchesNothing { step: String, input: String },
    #[error("step `{step}`: input `{input}` matches no file and no step produces it")]
    InputNotProduced { step: String, input: String },
    /// A `{placeholder}` that cannot be filled.
    #[error("step `{step}`: {message}")]
    Template { step: String, message: String },
    /// A path outside the project (or one jb cannot represent).
    #[error("step `{step}`: {message}")]
    PathEscape { step: String, message: String },
    #[error("two instances of step `{step}` have the same id `{id}`: give `foreach` a variable that tells them apart")]
    DuplicateId { step: String, id: String },
    /// Anything else wrong with a YAML file jb reads (a search space, `jb.yaml`).
    #[error("{0}")]
    Invalid(String),
}

impl PipelineErrorKind {
    /// A short code naming the kind (shown on a terminal).
    pub fn code(&self) -> &'static str {
        use PipelineErrorKind::*;
        match self {
            Syntax(_) => "syntax",
            DuplicateKey(_) => "duplicate_key",
            UnknownField(_) => "unknown_field",
            UnknownVariant(_) => "unknown_variant",
            WrongType(_) => "wrong_type",
            MissingField(_) => "missing_field",
            NotUtf8 { .. } => "not_utf8",
            TooDeep { .. } => "too_deep",
            InvalidPipelineName(_) | InvalidStepName(_) => "invalid_name",
            DuplicatePipelineName { .. } => "duplicate_pipeline",
            NoSteps => "no_steps",
            AllowOutside(_) => "allow_outside",
            CommandNeedsRun(_) | RunNotForKind(_) => "run",
            BadTimeout(_) => "timeout",
            Foreach { .. } => "foreach",
            UnknownStep { .. } => "unknown_step",
            Cycle(_) => "cycle",
            GlobMatchesNothing { .. } | InputMatchesNothing { .. } => "no_match",
            InputNotProduced { .. } => "missing_input",
            Template { .. } => "template",
            PathEscape { .. } => "path_escape",
            DuplicateId { .. } => "duplicate_id",
            Invalid(_) => "invalid",
        }
    }

    /// What the label under the offending text says.
    pub fn label(&self) -> &'static str {
        use PipelineErrorKind::*;
        match self {
            Syntax(_) => "here",
            DuplicateKey(_) => "already given above",
            UnknownField(_) => "unknown key",
            UnknownVariant(_) => "not one of the names allowed",
            WrongType(_) => "wrong type",
            MissingField(_) => "incomplete",
            NotUtf8 { .. } => "this byte",
            TooDeep { .. } => "too deep",
            InvalidPipelineName(_) | InvalidStepName(_) => "invalid name",
            DuplicatePipelineName { .. } => "name taken",
            NoSteps => "no steps",
            AllowOutside(_) => "not an absolute path without `..`",
            CommandNeedsRun(_) => "this step has no `run`",
            RunNotForKind(_) => "not a `command` step",
            BadTimeout(_) => "not a positive number",
            Foreach { .. } => "this entry",
            UnknownStep { .. } => "no such step",
            Cycle(_) => "closes the cycle",
            GlobMatchesNothing { .. } | InputMatchesNothing { .. } => "matches nothing",
            InputNotProduced { .. } => "no such file",
            Template { .. } => "cannot be filled",
            PathEscape { .. } => "outside the project",
            DuplicateId { .. } => "instances clash",
            Invalid(_) => "here",
        }
    }

    /// Advice beyond the message, where there is some.
    pub fn help(&self) -> Option<String> {
        use PipelineErrorKind::*;
        Some(match self {
            DuplicateKey(_) => "a key may appear once in a mapping; remove or rename one".into(),
            NotUtf8 { .. } => "re-encode the file, e.g. `iconv -f latin1 -t utf-8`".into(),
            InvalidPipelineName(_) | InvalidStepName(_) => {
                "names are part of step ids like `pipeline/step[var=value]`".into()
            }
            UnknownStep { .. } => {
                "name a step of this pipeline, or `pipeline/step` for another pipeline".into()
            }
            Cycle(_) => "a step cannot depend on itself, directly or through others".into(),
            GlobMatchesNothing { .. } => {
                "`jb list steps` shows what each pattern expands to".into()
            }
            Template { .. } => {
                "variables come from `foreach` (and `scale`, `backend`, `pipeline`, `step`)".into()
            }
            PathEscape { .. } => "paths are relative to the project root".into(),
            _ => return None,
        })
    }
}

/// A pipeline error: its kind, the file and the span in it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}: {kind}", self.location())]
pub struct PipelineError {
    pub file: PathBuf,
    pub span: Span,
    pub kind: PipelineErrorKind,
    /// The file's text, when it is at hand (else a drawing reads the file).
    pub text: Option<Arc<str>>,
}

impl PipelineError {
    pub fn new(file: impl Into<PathBuf>, span: Span, kind: PipelineErrorKind) -> Self {
        PipelineError {
            file: file.into(),
            span,
            kind,
            text: None,
        }
    }

    pub fn with_text(mut self, text: &str) -> Self {
        self.text = Some(Arc::from(text));
        self
    }

    pub fn location(&self) -> Location {
        Location {
            file: self.file.clone(),
            line: self.span.line,
            column: self.span.column,
        }
    }

    /// A serde error of a YAML file, typed by what serde says and placed where it says (or, for
    /// a missing field, at the mapping that lacks it).
    pub fn from_serde(
        file: &Path,
        text: &str,
        tree: Option<&SpanTree>,
        e: &serde_norway::Error,
    ) -> Self {
        let msg = e.to_string();
        // serde_norway appends " at line L column C"; the location is already in front.
        let msg = match msg.find(" at line ") {
            Some(i) => msg[..i].to_string(),
            None => msg,
        };
        let mut span = e.location().map_or(Span::START, |l| {
            Span::at_line_col(text, l.line(), l.column())
        });
        if let Some(s) = tree.and_then(|t| t.starting_at(span.offset)) {
            span.len = s.len;
        }
        // The text after the `path: ` serde puts in front.
        let what = msg.split_once(": ").map_or(msg.as_str(), |(_, m)| m);
        let kind = if what.starts_with("unknown field") || msg.starts_with("unknown field") {
            PipelineErrorKind::UnknownField(msg)
        } else if what.starts_with("unknown variant") || msg.starts_with("unknown variant") {
            PipelineErrorKind::UnknownVariant(msg)
        } else if what.starts_with("invalid type") || what.starts_with("invalid value") {
            PipelineErrorKind::WrongType(msg)
        } else if what.starts_with("missing field") || msg.starts_with("missing field") {
            // serde points past the mapping's last entry; the key that holds it reads better.
            if let (Some(t), Some((path, _))) = (tree, msg.split_once(": missing field")) {
                let segs = serde_path(path);
                span = t.key(&segs);
            }
            PipelineErrorKind::MissingField(msg)
        } else if what.starts_with("duplicate") || msg.starts_with("duplicate") {
            PipelineErrorKind::DuplicateKey(msg)
        } else {
            PipelineErrorKind::Invalid(msg)
        };
        PipelineError::new(file, span, kind).with_text(text)
    }
}

/// The segments of a path as serde writes it: `steps.b.foreach[0]`.
fn serde_path(path: &str) -> Vec<Seg<'_>> {
    let mut segs = Vec::new();
    for part in path.split('.') {
        let (key, mut rest) = part.split_at(part.find('[').unwrap_or(part.len()));
        if !key.is_empty() {
            segs.push(Seg::Key(key));
        }
        while let Some((i, tail)) = rest
            .strip_prefix('[')
            .and_then(|r| r.split_once(']'))
            .and_then(|(i, t)| Some((i.parse().ok()?, t)))
        {
            segs.push(Seg::Item(i));
            rest = tail;
        }
    }
    segs
}

/// A YAML file's text; a file that is not UTF-8 is an error at its first bad byte.
pub fn utf8_text(file: &Path, bytes: Vec<u8>) -> crate::error::Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let before = &bytes[..offset];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let column = String::from_utf8_lossy(&before[line_start..])
            .chars()
            .count()
            + 1;
        let span = Span {
            offset,
            // The replacement character the bad byte becomes in the text kept for drawing.
            len: char::REPLACEMENT_CHARACTER.len_utf8(),
            line,
            column,
        };
        let kind = PipelineErrorKind::NotUtf8 {
            byte: bytes[offset],
            offset,
        };
        // The text up to the bad byte, so a drawing can show the line it is on.
        let shown = String::from_utf8_lossy(bytes);
        PipelineError::new(file, span, kind)
            .with_text(&shown)
            .into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_paths() {
        assert_eq!(
            serde_path("steps.b.foreach[0][2].match"),
            vec![
                Seg::Key("steps"),
                Seg::Key("b"),
                Seg::Key("foreach"),
                Seg::Item(0),
                Seg::Item(2),
                Seg::Key("match")
            ]
        );
    }

    #[test]
    fn not_utf8_names_the_first_bad_byte() {
        let e = utf8_text(Path::new("p.yaml"), b"a: 1\nb: caf\xe9\n".to_vec()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "p.yaml:2:7: the file is not UTF-8 text (byte 0xe9 at offset 11); save it as UTF-8"
        );
    }
}
