//! Rendering a pipeline error for a person at a terminal: the message, where it is, and the
//! offending line with a caret under the column. Elsewhere (pipes, logs, tests) jb prints the
//! one-line `file:line:col: message` contract instead.

use std::path::Path;

use crate::error::Location;

/// The error with its source line, when the file can be read (`root`: what relative paths are
/// relative to); `None` otherwise (print the one-line form).
pub fn render(at: &Location, message: &str, root: &Path) -> Option<String> {
    let path = if at.file.is_absolute() {
        at.file.clone()
    } else {
        root.join(&at.file)
    };
    let bytes = std::fs::read(path).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let line = text.lines().nth(at.line.checked_sub(1)?)?;
    let number = at.line.to_string();
    let pad = " ".repeat(number.len());
    let caret_at: String = line
        .chars()
        .take(at.column.saturating_sub(1))
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    Some(format!(
        "error: {message}\n{pad}--> {at}\n{pad} |\n{number} | {line}\n{pad} | {caret_at}^\n"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_at_the_column() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("p.yaml"), "steps:\n  a:\n    rn: echo\n").unwrap();
        let at = Location {
            file: "p.yaml".into(),
            line: 3,
            column: 5,
        };
        let r = render(&at, "unknown field `rn`", dir.path()).unwrap();
        assert_eq!(
            r,
            "error: unknown field `rn`\n --> p.yaml:3:5\n  |\n3 |     rn: echo\n  |     ^\n"
        );
        let missing = Location {
            file: "nope.yaml".into(),
            ..at
        };
        assert!(render(&missing, "x", dir.path()).is_none());
    }
}
