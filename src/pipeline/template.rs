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
}
