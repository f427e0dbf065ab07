//! A quick nesting pre-check of pipeline YAML, before the YAML parser sees it: deeply nested
//! text (`[[[[...`, `- - - -...`, a staircase of keys) is refused at the line where it goes
//! past [`MAX_DEPTH`] levels, in time linear in the text, instead of keeping the parser busy.

use std::path::Path;

use super::error::{PipelineError, PipelineErrorKind};
use super::span::Span;
use crate::error::Result;

/// The most nesting levels (block and flow together) a pipeline may use.
pub const MAX_DEPTH: usize = 64;

/// Refuse text nested deeper than [`MAX_DEPTH`] levels, naming file, line and column.
pub fn check(path: &Path, text: &str) -> Result<()> {
    match first_too_deep(text, MAX_DEPTH) {
        Some((line, column, depth)) => Err(PipelineError::new(
            path,
            Span::at_line_col(text, line, column),
            PipelineErrorKind::TooDeep {
                max: MAX_DEPTH,
                depth,
            },
        )
        .with_text(text)
        .into()),
        None => Ok(()),
    }
}

/// Whether a line's value starts a block scalar (`|`, `>`, with chomping/indent indicators).
fn starts_block_scalar(content: &str) -> bool {
    let t = content.trim_end();
    let last = t.rsplit([' ', '\t']).next().unwrap_or("");
    let mut chars = last.chars();
    matches!(chars.next(), Some('|' | '>'))
        && chars.all(|c| matches!(c, '+' | '-') || c.is_ascii_digit())
        && (t.len() == last.len()
            || t.ends_with(&format!(": {last}"))
            || t.ends_with(&format!("- {last}")))
}

/// (line, column, depth) of the first place nested deeper than `max`, 1-based.
pub fn first_too_deep(text: &str, max: usize) -> Option<(usize, usize, usize)> {
    // Columns of the open block nodes.
    let mut block: Vec<usize> = Vec::new();
    // Open flow collections and quotes carry over lines.
    let mut flow = 0usize;
    let mut quote: Option<char> = None;
    // Inside a block scalar: lines indented deeper than this column are text.
    let mut scalar_at: Option<usize> = None;
    for (n, line) in text.lines().enumerate() {
        let lineno = n + 1;
        let indent = line.len() - line.trim_start_matches(' ').len();
        let rest = &line[indent..];
        if let Some(col) = scalar_at {
            if rest.trim().is_empty() || indent > col {
                continue;
            }
            scalar_at = None;
        }
        let mut col = indent;
        if flow == 0 && quote.is_none() {
            if rest.is_empty() || rest.starts_with('#') {
                continue;
            }
            if rest.starts_with("---") || rest.starts_with("...") {
                block.clear();
                continue;
            }
            // Block nodes: each `- ` opens one more level, then the content does.
            while block.last().is_some_and(|&c| c >= col) {
                block.pop();
            }
            let bytes = line.as_bytes();
            loop {
                block.push(col);
                if block.len() > max {
                    return Some((lineno, col + 1, block.len()));
                }
                let is_dash = bytes.get(col) == Some(&b'-')
                    && matches!(bytes.get(col + 1), None | Some(b' ' | b'\t'));
                if !is_dash {
                    break;
                }
                col += 1;
                while matches!(bytes.get(col), Some(b' ' | b'\t')) {
                    col += 1;
                }
                if col >= bytes.len() {
                    break;
                }
            }
            if starts_block_scalar(&line[col.min(line.len())..]) {
                scalar_at = Some(indent);
            }
        }
        // Flow collections and quotes on the rest of the line.
        let mut prev = ' ';
        for (i, c) in line.char_indices().skip_while(|(i, _)| *i < col) {
            match quote {
                Some('\'') if c == '\'' => quote = None,
                Some('"') if c == '"' && prev != '\\' => quote = None,
                Some(_) => {}
                None => match c {
                    '#' if prev == ' ' || prev == '\t' || i == 0 => break,
                    '\'' | '"' if flow > 0 || matches!(prev, ' ' | '[' | '{' | ',' | ':') => {
                        quote = Some(c)
                    }
                    '[' | '{' => {
                        flow += 1;
                        if block.len() + flow > max {
                            return Some((lineno, i + 1, block.len() + flow));
                        }
                    }
                    ']' | '}' => flow = flow.saturating_sub(1),
                    _ => {}
                },
            }
            prev = if prev == '\\' && c == '\\' { ' ' } else { c };
        }
        if flow == 0 && quote == Some('\'') && !line.is_empty() {
            // A plain apostrophe in block context (`it's`) opens nothing.
            quote = None;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_pipelines_pass() {
        let text = "name: x\nsteps:\n  a:\n    kind: command\n    foreach: [{match: \"src/{n}.txt\"}, {values: {k: [1, 2]}}]\n    run: |\n      if true; then\n        if true; then\n          echo it's {n}\n        fi\n      fi\n    outputs:\n      - out/a.txt\n      - - nested\n        - list\n";
        assert_eq!(first_too_deep(text, 8), None);
        assert!(first_too_deep(text, 6).is_some());
        for f in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/pipelines")).unwrap() {
            let t = std::fs::read_to_string(f.unwrap().path()).unwrap();
            assert_eq!(first_too_deep(&t, MAX_DEPTH), None);
        }
    }

    #[test]
    fn deep_nesting_is_found_where_it_goes_too_deep() {
        let flow = format!("steps: {}1{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(first_too_deep(&flow, 64), Some((1, 71, 65)));
        let mut block = String::from("steps:\n");
        for i in 1..2_000 {
            block.push_str(&" ".repeat(i));
            block.push_str("a:\n");
        }
        assert_eq!(first_too_deep(&block, 64).map(|x| x.0), Some(65));
        let dashes = format!("steps:\n  {}x\n", "- ".repeat(100_000));
        assert_eq!(first_too_deep(&dashes, 64).map(|x| x.0), Some(2));
        let mixed = format!("steps:\n  a:\n    b: {}\n", "{c: ".repeat(70));
        assert_eq!(first_too_deep(&mixed, 64).map(|x| x.0), Some(3));
    }
}
