//! `{var}` placeholders in pipeline strings and parameters.

use indexmap::IndexMap;
use serde_json::Value;

/// Variables bound for one step instance (in binding order).
pub type Vars = IndexMap<String, Value>;

pub fn var_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Replace `{name}` by the variable's text. `${...}` (shell) and `{{`/`}}` (literal braces) are
/// left alone. An unknown name is an error naming it.
pub fn fill(text: &str, vars: &Vars) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'{' && bytes.get(i + 1) == Some(&b'{') {
            out.push_str("{{");
            i += 2;
            continue;
        }
        if c == b'{' && (i == 0 || bytes[i - 1] != b'$') {
            if let Some(end) = text[i + 1..].find('}') {
                let name = &text[i + 1..i + 1 + end];
                if is_ident(name) {
                    match vars.get(name) {
                        Some(v) => out.push_str(&var_string(v)),
                        None => {
                            let known: Vec<&str> = vars.keys().map(String::as_str).collect();
                            return Err(format!(
                                "unknown variable `{{{name}}}` (known here: {})",
                                if known.is_empty() {
                                    "none".to_string()
                                } else {
                                    known.join(", ")
                                }
                            ));
                        }
                    }
                    i += end + 2;
                    continue;
                }
            }
        }
        let ch = text[i..].chars().next().unwrap_or('\0');
        out.push(ch);
        i += ch.len_utf8();
    }
    Ok(out)
}

/// Where a placeholder stands in a shell command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quote {
    /// Unquoted (also inside `$(...)`): the value becomes one single-quoted word.
    None,
    /// Inside `'...'`: each `'` of the value becomes `'\''`.
    Single,
    /// Inside `"..."`: `\`, `$`, `` ` `` and `"` are backslash-escaped.
    Double,
    /// Inside a backtick command substitution: single-quoted, then `\`, `` ` ``, `$` escaped.
    Backtick,
}

/// The shell text that stands for `value` where the command has the quoting `q`: the shell
/// reads it back as exactly `value`, one word, never as syntax.
fn shell_quoted(value: &str, q: Quote) -> String {
    match q {
        Quote::None => format!("'{}'", value.replace('\'', "'\\''")),
        // The shell removes one level of backslashes before `\`, `` ` `` and `$` in a backtick
        // command substitution before it parses the command.
        Quote::Backtick => shell_quoted(value, Quote::None)
            .chars()
            .flat_map(|c| {
                let esc = matches!(c, '\\' | '`' | '$').then_some('\\');
                esc.into_iter().chain(std::iter::once(c))
            })
            .collect(),
        Quote::Single => value.replace('\'', "'\\''"),
        Quote::Double => {
            let mut out = String::with_capacity(value.len());
            for c in value.chars() {
                if matches!(c, '\\' | '$' | '`' | '"') {
                    out.push('\\');
                }
                out.push(c);
            }
            out
        }
    }
}

/// [`fill`] for a `command` step's `run:`: every value is shell-quoted for the place it stands
/// in (unquoted, in `'...'`, in `"..."`, in `$(...)` or backticks), so a value is always data —
/// a file named `a;touch X;` or `$(touch X)` or holding a quote is passed as that name. Shell
/// syntax of the command itself (`${VAR}`, `{{`/`}}`) is left alone, as in [`fill`]. The values
/// are also in the environment as `JB_VAR_<name>` (see `exec::command`).
pub fn fill_shell(text: &str, vars: &Vars) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    // The quoting stack: `$(` and backticks open a fresh unquoted context; each frame counts
    // the plain parentheses opened in it, so `)` closes the right one.
    let mut stack: Vec<(Quote, u32)> = vec![(Quote::None, 0)];
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let (q, parens) = *stack.last().expect("never empty");
        if c == b'{' && bytes.get(i + 1) == Some(&b'{') {
            out.push_str("{{");
            i += 2;
            continue;
        }
        if c == b'{' && (i == 0 || bytes[i - 1] != b'$') {
            if let Some(end) = text[i + 1..].find('}') {
                let name = &text[i + 1..i + 1 + end];
                if is_ident(name) {
                    let v = vars.get(name).ok_or_else(|| unknown(name, vars))?;
                    out.push_str(&shell_quoted(&var_string(v), q));
                    i += end + 2;
                    continue;
                }
            }
        }
        let ch = text[i..].chars().next().unwrap_or('\0');
        let len = ch.len_utf8();
        match (q, c) {
            (Quote::Single, b'\'') => {
                stack.pop();
            }
            (Quote::Single, _) => {}
            (_, b'\\') => {
                // An escaped character: copy both.
                out.push('\\');
                i += 1;
                if let Some(next) = text[i..].chars().next() {
                    out.push(next);
                    i += next.len_utf8();
                }
                continue;
            }
            (Quote::Double, b'"') => {
                stack.pop();
            }
            (Quote::Backtick, b'`') => {
                stack.pop();
            }
            (_, b'$') if bytes.get(i + 1) == Some(&b'(') => {
                stack.push((Quote::None, 0));
                out.push_str("$(");
                i += 2;
                continue;
            }
            (_, b'`') => stack.push((Quote::Backtick, 0)),
            (Quote::None | Quote::Backtick, b'\'') => stack.push((Quote::Single, 0)),
            (Quote::None | Quote::Backtick, b'"') => stack.push((Quote::Double, 0)),
            (Quote::None, b'(') => stack.last_mut().expect("never empty").1 += 1,
            (Quote::None, b')') => {
                if parens > 0 {
                    stack.last_mut().expect("never empty").1 -= 1;
                } else if stack.len() > 1 {
                    stack.pop();
                }
            }
            _ => {}
        }
        out.push(ch);
        i += len;
    }
    Ok(out)
}

fn unknown(name: &str, vars: &Vars) -> String {
    let known: Vec<&str> = vars.keys().map(String::as_str).collect();
    format!(
        "unknown variable `{{{name}}}` (known here: {})",
        if known.is_empty() {
            "none".to_string()
        } else {
            known.join(", ")
        }
    )
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Fill placeholders throughout a JSON value. A string that is exactly `{name}` takes the
/// variable's JSON value (so numbers and objects keep their type).
pub fn fill_value(v: &Value, vars: &Vars) -> Result<Value, String> {
    Ok(match v {
        Value::String(s) => {
            let t = s.trim();
            if t.starts_with('{') && t.ends_with('}') && is_ident(&t[1..t.len() - 1]) {
                if let Some(val) = vars.get(&t[1..t.len() - 1]) {
                    return Ok(val.clone());
                }
            }
            Value::String(fill(s, vars)?)
        }
        Value::Array(a) => Value::Array(
            a.iter()
                .map(|x| fill_value(x, vars))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(o) => {
            let mut m = serde_json::Map::new();
            for (k, x) in o {
                m.insert(k.clone(), fill_value(x, vars)?);
            }
            Value::Object(m)
        }
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fills_and_keeps_shell() {
        let mut vars = Vars::new();
        vars.insert("w".into(), json!("12p_RMSNorm"));
        vars.insert("n".into(), json!(3));
        assert_eq!(
            fill("a/{w}/b ${HOME} {{x}}", &vars).unwrap(),
            "a/12p_RMSNorm/b ${HOME} {{x}}"
        );
        assert!(fill("{nope}", &vars).unwrap_err().contains("nope"));
        assert_eq!(
            fill_value(&json!({"k": "{n}", "s": "x{n}"}), &vars).unwrap(),
            json!({"k": 3, "s": "x3"})
        );
    }

    /// What `sh` makes of a filled command: its argv, printed one per line.
    fn sh_words(script: &str) -> Vec<String> {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("for a in {script}; do printf '%s\\0' \"$a\"; done"))
            .output()
            .unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .split('\0')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn shell_values_are_data() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("X");
        let m = marker.to_string_lossy().to_string();
        for evil in [
            format!("a;touch {m};"),
            format!("$(touch {m})"),
            format!("`touch {m}`"),
            "it's \"quoted\" \\ $HOME".to_string(),
            "new\nline".to_string(),
            String::new(),
        ] {
            let mut vars = Vars::new();
            vars.insert("f".into(), json!(evil));
            // Unquoted, single-quoted, double-quoted, in $(...) and in backticks.
            for (template, expect) in [
                ("{f}", evil.clone()),
                ("x{f}y", format!("x{evil}y")),
                ("'<{f}>'", format!("<{evil}>")),
                ("\"<{f}>\"", format!("<{evil}>")),
                ("\"$(printf '%s' {f})\"", evil.clone()),
                ("\"`printf '%s' {f}`\"", evil.clone()),
            ] {
                let script = fill_shell(template, &vars).unwrap();
                let words = sh_words(&script);
                if expect.is_empty() && !template.contains('<') && !template.contains('x') {
                    continue;
                }
                assert_eq!(
                    words,
                    vec![expect.clone()],
                    "{template} with {evil:?}: {script}"
                );
            }
            assert!(!marker.exists(), "{evil:?} ran a command");
        }
        let mut vars = Vars::new();
        vars.insert("n".into(), json!(1));
        assert_eq!(
            fill_shell("tr a-z A-Z < src/in{n}.txt > ${OUT}/a{n}.txt {{x}}", &vars).unwrap(),
            "tr a-z A-Z < src/in'1'.txt > ${OUT}/a'1'.txt {{x}}"
        );
        assert!(fill_shell("{nope}", &vars).unwrap_err().contains("nope"));
    }
}
