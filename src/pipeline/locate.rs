//! Find where a key sits in a YAML text, for error messages about valid YAML with wrong meaning.
//!
//! serde reports syntax and type errors with their position; semantic errors (a missing step, a
//! cycle, a glob that matches nothing) are found after parsing, so their position is recovered by
//! walking the block-mapping keys of the text along a key path.

/// 1-based (line, column) of the key at `path` (e.g. `["steps", "compile", "needs"]`), or of the
/// deepest prefix found.
pub fn locate_key(text: &str, path: &[&str]) -> (usize, usize) {
    let lines: Vec<&str> = text.lines().collect();
    let mut best = (1, 1);
    let mut start = 0usize;
    let mut end = lines.len();
    let mut parent_indent: isize = -1;
    for key in path {
        let mut found = None;
        let mut child_indent: Option<usize> = None;
        for (i, line) in lines.iter().enumerate().take(end).skip(start) {
            let trimmed = line.trim_start();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let indent = line.len() - trimmed.len();
            if (indent as isize) <= parent_indent {
                break;
            }
            let indent_ok = match child_indent {
                None => {
                    child_indent = Some(indent);
                    true
                }
                Some(c) => indent == c,
            };
            if !indent_ok {
                continue;
            }
            let item = trimmed.trim_start_matches("- ");
            let name = item
                .split_once(':')
                .map(|(k, _)| k.trim().trim_matches('"').trim_matches('\''));
            if name == Some(key) {
                found = Some((i, indent + (trimmed.len() - item.len())));
                break;
            }
        }
        match found {
            Some((i, col)) => {
                best = (i + 1, col + 1);
                start = i + 1;
                parent_indent = col as isize;
                end = lines.len();
            }
            None => break,
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "name: p\nsteps:\n  a:\n    kind: command\n    needs: [b]\n  b:\n    kind: command\n    run: echo\n";

    #[test]
    fn finds_nested_keys() {
        assert_eq!(locate_key(TEXT, &["steps"]), (2, 1));
        assert_eq!(locate_key(TEXT, &["steps", "b"]), (6, 3));
        assert_eq!(locate_key(TEXT, &["steps", "a", "needs"]), (5, 5));
        assert_eq!(locate_key(TEXT, &["steps", "b", "run"]), (8, 5));
    }

    #[test]
    fn falls_back_to_deepest_prefix() {
        assert_eq!(locate_key(TEXT, &["steps", "zzz"]), (2, 1));
    }
}
