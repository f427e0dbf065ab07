//! Showing a pipeline error. For a person at a terminal: a miette report (the source lines, a
//! label under the offending text, help where there is some). Elsewhere (pipes, logs, tests):
//! the one-line `error: file:line:col: message` contract. `JB_DIAGNOSTICS=fancy|plain` forces
//! either; by default the report is drawn when stderr is a terminal and `NO_COLOR` is unset.

use std::fmt;
use std::path::Path;

use miette::{
    Diagnostic, GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceCode,
};

use super::error::PipelineError;
use super::span::Span;

/// How an error is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// `error: file:line:col: message`, one line.
    Plain,
    /// A drawn report, in colour or not.
    Fancy { color: bool },
}

impl Style {
    /// The style for stderr: `JB_DIAGNOSTICS` (`fancy`, `plain`, `auto`), else the terminal.
    pub fn from_env() -> Style {
        use std::io::IsTerminal;
        let terminal = std::io::stderr().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        match std::env::var("JB_DIAGNOSTICS").as_deref() {
            Ok("plain") => Style::Plain,
            Ok("fancy") => Style::Fancy {
                color: terminal && !no_color,
            },
            _ if terminal && !no_color => Style::Fancy { color: true },
            _ => Style::Plain,
        }
    }
}

/// The error as `style` shows it, ending in a newline (`root`: what relative paths are relative
/// to, for reading a file whose text the error does not carry).
pub fn render(err: &PipelineError, style: Style, root: &Path) -> String {
    let Style::Fancy { color } = style else {
        return format!("error: {err}\n");
    };
    let Some(report) = Report::new(err, root) else {
        return format!("error: {err}\n");
    };
    let theme = if color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let mut out = String::new();
    let drawn = GraphicalReportHandler::new_themed(theme)
        .with_width(100)
        .with_links(false)
        .render_report(&mut out, &report);
    match drawn {
        Ok(()) => out,
        Err(_) => format!("error: {err}\n"),
    }
}

/// A pipeline error with its source, as miette wants it.
struct Report<'a> {
    err: &'a PipelineError,
    source: NamedSource<String>,
    span: Span,
}

impl<'a> Report<'a> {
    /// `None` when the file's text is neither carried nor readable, or the error has no
    /// position (a generated pipeline's).
    fn new(err: &'a PipelineError, root: &Path) -> Option<Report<'a>> {
        if err.span.line == 0 {
            return None;
        }
        let (text, span) = match &err.text {
            Some(t) => (t.to_string(), err.span),
            None => {
                // Only the line and column are known: find them in the file.
                let path = root.join(&err.file);
                let text = String::from_utf8_lossy(&std::fs::read(path).ok()?).into_owned();
                let span = Span::at_line_col(&text, err.span.line, err.span.column);
                (text, span)
            }
        };
        let span = first_line(&text, span);
        let name = err.file.display().to_string();
        Some(Report {
            err,
            source: NamedSource::new(name, text).with_language("yaml"),
            span,
        })
    }
}

/// The part of `span` on its first line (a label under a whole block reads badly).
fn first_line(text: &str, mut span: Span) -> Span {
    let start = span.offset.min(text.len());
    let end = (start + span.len).min(text.len());
    if let Some(nl) = text.get(start..end).and_then(|s| s.find('\n')) {
        span.len = nl;
    }
    span.offset = start;
    span
}

impl fmt::Debug for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.err, f)
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.err.kind)
    }
}

impl std::error::Error for Report<'_> {}

impl Diagnostic for Report<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        Some(Box::new(format!("jb::pipeline::{}", self.err.kind.code())))
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.err
            .kind
            .help()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        Some(&self.source)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let label = LabeledSpan::new(
            Some(self.err.kind.label().to_string()),
            self.span.offset,
            self.span.len,
        );
        Some(Box::new(std::iter::once(label)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::error::PipelineErrorKind;

    #[test]
    fn plain_is_one_line_and_fancy_draws_the_source() {
        let text = "steps:\n  a:\n    rn: echo\n";
        let err = PipelineError::new(
            "p.yaml",
            Span::at_line_col(text, 3, 5),
            PipelineErrorKind::UnknownField("unknown field `rn`".into()),
        )
        .with_text(text);
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            render(&err, Style::Plain, dir.path()),
            "error: p.yaml:3:5: unknown field `rn`\n"
        );
        let fancy = render(&err, Style::Fancy { color: false }, dir.path());
        assert!(fancy.contains("jb::pipeline::unknown_field"), "{fancy}");
        assert!(fancy.contains("[p.yaml:3:5]"), "{fancy}");
        assert!(fancy.contains("rn: echo"), "{fancy}");
        assert!(fancy.contains("unknown key"), "{fancy}");
    }

    #[test]
    fn reads_the_file_when_the_text_is_not_carried() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("s.yaml"), "space:\n  cpu: 1\n").unwrap();
        let err = crate::error::JbError::pipeline("s.yaml", 2, 3, "bad");
        let err = err.as_pipeline().unwrap();
        let fancy = render(err, Style::Fancy { color: false }, dir.path());
        assert!(fancy.contains("[s.yaml:2:3]"), "{fancy}");
        let missing = PipelineError {
            file: "nope.yaml".into(),
            ..err.clone()
        };
        assert_eq!(
            render(&missing, Style::Fancy { color: false }, dir.path()),
            "error: nope.yaml:2:3: bad\n"
        );
    }
}
