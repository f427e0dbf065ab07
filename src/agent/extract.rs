//! The code of an answer: its largest ```python block (the last one among equals). Blocks
//! fenced without a language count only when nothing is tagged Python and they define
//! `workload`. A block cut off by the end of the answer (a truncated answer) is used only when
//! there is no complete one. An answer without any is the outcome `no_code`.

#[derive(Debug, Clone, PartialEq)]
struct Block {
    lang: String,
    body: String,
    closed: bool,
}

/// Fenced code blocks (``` or ~~~, up to three spaces of indentation), in order.
fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<(String, usize, char, Vec<&str>)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start_matches(' ');
        let indent = line.len() - trimmed.len();
        let fence_char = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let fence_len = fence_char
            .map(|c| trimmed.chars().take_while(|x| *x == c).count())
            .unwrap_or(0);
        match &mut open {
            None => {
                if indent <= 3 && fence_len >= 3 {
                    let c = fence_char.expect("fence");
                    let info = trimmed[fence_len..].trim();
                    if c == '`' && info.contains('`') {
                        continue; // inline code, not a fence
                    }
                    let lang = info
                        .split(|ch: char| ch.is_whitespace() || ch == '{')
                        .next()
                        .unwrap_or("")
                        .to_lowercase();
                    open = Some((lang, fence_len, c, Vec::new()));
                }
            }
            Some((lang, len, c, body)) => {
                let closes = indent <= 3
                    && fence_char == Some(*c)
                    && fence_len >= *len
                    && trimmed[fence_len..].trim().is_empty();
                if closes {
                    out.push(Block {
                        lang: std::mem::take(lang),
                        body: body.join("\n"),
                        closed: true,
                    });
                    open = None;
                } else {
                    body.push(line);
                }
            }
        }
    }
    if let Some((lang, _, _, body)) = open {
        out.push(Block {
            lang,
            body: body.join("\n"),
            closed: false,
        });
    }
    out
}

fn is_python(lang: &str) -> bool {
    matches!(lang, "python" | "py" | "python3" | "py3")
}

/// The code to evaluate, or `None` (outcome `no_code`).
pub fn extract_code(answer: &str) -> Option<String> {
    let all = blocks(answer);
    let nonempty = |b: &&Block| !b.body.trim().is_empty();
    let mut pool: Vec<&Block> = all
        .iter()
        .filter(|b| is_python(&b.lang))
        .filter(nonempty)
        .collect();
    if pool.is_empty() {
        pool = all
            .iter()
            .filter(|b| b.lang.is_empty() && b.body.contains("def workload"))
            .filter(nonempty)
            .collect();
    }
    if pool.iter().any(|b| b.closed) {
        pool.retain(|b| b.closed);
    }
    // Largest wins; among equals, the last.
    let best = pool
        .iter()
        .enumerate()
        .max_by_key(|(i, b)| (b.body.trim().len(), *i))
        .map(|(_, b)| *b)?;
    let mut code = best.body.trim_matches('\n').to_string();
    code.push('\n');
    Some(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_python_block_wins() {
        let a = "Plan:\n```python\nx = 1\n```\nthen\n```python\nimport jax\n\ndef workload(x):\n    return x\n```\nand a note\n```bash\necho hi there this is long\n```\n";
        assert_eq!(
            extract_code(a).unwrap(),
            "import jax\n\ndef workload(x):\n    return x\n"
        );
    }

    #[test]
    fn last_among_equals() {
        let a = "```python\na = 1\n```\n```py\nb = 2\n```\n";
        assert_eq!(extract_code(a).unwrap(), "b = 2\n");
    }

    #[test]
    fn no_code() {
        assert_eq!(extract_code("I cannot do that."), None);
        assert_eq!(extract_code("```bash\nls\n```"), None);
        assert_eq!(extract_code("```python\n\n```"), None);
        assert_eq!(extract_code("inline ```python x``` only"), None);
    }

    #[test]
    fn untagged_block_defining_workload() {
        let a = "```\ndef workload(x):\n    return x\n```";
        assert_eq!(extract_code(a).unwrap(), "def workload(x):\n    return x\n");
        assert_eq!(extract_code("```\nprint(1)\n```"), None);
    }

    #[test]
    fn truncated_block_only_when_nothing_else() {
        let a = "```python\ndef workload(x):\n    return x\n";
        assert_eq!(extract_code(a).unwrap(), "def workload(x):\n    return x\n");
        let b = "```python\nok = 1\n```\n```python\ndef workload(x):\n    return x  # cut off here by max_tokens";
        assert_eq!(extract_code(b).unwrap(), "ok = 1\n");
    }

    #[test]
    fn tildes_longer_fences_and_nested_backticks() {
        let a = "~~~python\ns = '```'\n~~~\n";
        assert_eq!(extract_code(a).unwrap(), "s = '```'\n");
        let b = "````python\ndoc = \"\"\"\n```python\ninner\n```\n\"\"\"\n````\n";
        assert_eq!(
            extract_code(b).unwrap(),
            "doc = \"\"\"\n```python\ninner\n```\n\"\"\"\n"
        );
        let c = "```Python {.numberLines}\nz = 3\n```";
        assert_eq!(extract_code(c).unwrap(), "z = 3\n");
    }
}
