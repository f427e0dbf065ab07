//! Action keys: blake3 over a canonical encoding of everything a step's result depends on.
//!
//! Each component keeps its own sub-hash, stored with the record, so `jb explain` can say which
//! file, parameter, upstream result or environment version changed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Bump when the key recipe changes: every key changes with it.
pub const KEY_SCHEMA_VERSION: &str = "jb-key-1";

/// Named sub-hashes that make up a key, in a canonical (sorted) order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyComponents(pub BTreeMap<String, String>);

impl KeyComponents {
    pub fn new() -> Self {
        let mut c = KeyComponents::default();
        c.set("schema", KEY_SCHEMA_VERSION);
        c
    }

    /// A component whose value is short and human-readable (kept as is).
    pub fn set(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.0.insert(name.into(), value.into());
    }

    /// A component stored as the hash of a JSON value (canonical: sorted keys).
    pub fn set_json(&mut self, name: impl Into<String>, value: &Value) {
        self.0
            .insert(name.into(), hash_hex(canonical_json(value).as_bytes()));
    }

    pub fn key(&self) -> String {
        let mut h = blake3::Hasher::new();
        for (k, v) in &self.0 {
            h.update(&(k.len() as u64).to_le_bytes());
            h.update(k.as_bytes());
            h.update(&(v.len() as u64).to_le_bytes());
            h.update(v.as_bytes());
        }
        h.finalize().to_hex().to_string()
    }

    /// What differs between an earlier set of components and this one.
    pub fn diff(&self, before: &KeyComponents) -> Vec<Change> {
        let mut out = Vec::new();
        for (k, v) in &self.0 {
            match before.0.get(k) {
                None => out.push(Change::Added(k.clone())),
                Some(w) if w != v => out.push(Change::Changed {
                    name: k.clone(),
                    before: w.clone(),
                    after: v.clone(),
                }),
                _ => {}
            }
        }
        for k in before.0.keys() {
            if !self.0.contains_key(k) {
                out.push(Change::Removed(k.clone()));
            }
        }
        out
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Added(String),
    Removed(String),
    Changed {
        name: String,
        before: String,
        after: String,
    },
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let short = |s: &str| {
            if s.len() == 64 {
                s[..12].to_string()
            } else {
                s.to_string()
            }
        };
        match self {
            Change::Added(n) => write!(f, "{} is new", describe(n)),
            Change::Removed(n) => write!(f, "{} is gone", describe(n)),
            Change::Changed {
                name,
                before,
                after,
            } => {
                write!(
                    f,
                    "{} changed ({} -> {})",
                    describe(name),
                    short(before),
                    short(after)
                )
            }
        }
    }
}

/// A component name in words: `input:workloads/x.py` -> `input file workloads/x.py`.
pub fn describe(name: &str) -> String {
    match name.split_once(':') {
        Some(("input", p)) => format!("input file {p}"),
        Some(("dep", s)) => format!("upstream result of {s}"),
        Some(("env", e)) => format!("environment {e}"),
        Some(("param", p)) => format!("parameter {p}"),
        _ => name.to_string(),
    }
}

pub fn hash_hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// JSON with object keys sorted, compact: the canonical text that is hashed.
pub fn canonical_json(v: &Value) -> String {
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::to_string(k).unwrap_or_default());
                    out.push(':');
                    write(&m[*k], out);
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(x, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut s = String::new();
    write(v, &mut s);
    s
}

/// Result fields that are measurements or bookkeeping, not the result's meaning: left out of the
/// output digest, so an identical upstream result does not invalidate downstream steps.
pub const VOLATILE_FIELDS: &[&str] = &[
    "compile_ms",
    "duration_ms",
    "samples_ms",
    "wall_samples_ms",
    "median_ms",
    "mean_ms",
    "std_ms",
    "min_ms",
    "p90_ms",
    "wall_median_ms",
    "tflops",
    "utilization",
    "trace",
    "timing",
    "worker_pid",
    "ray",
    "stderr_tail",
    "measurements",
    "pooled_median_ms",
    "pooled_samples",
    // Paired measurements (python/jb/ops/profile.py): ratios, intervals and secret seeds vary
    // from one measurement to the next.
    "paired",
    "speedup_vs_xla",
    "speedup_vs_handtuned",
    "seeds",
    // Where a sandboxed step ran and what it left behind (src/exec/sandbox.rs Jail::json, the
    // products' account): a Ray node's jail differs from this machine's, the program does not.
    "kernel_limits",
    "discarded_files",
    "discarded_bytes",
];

/// The digest of a step's output: its result without volatile fields, plus its files.
pub fn output_digest(result: &Value, files: &BTreeMap<String, String>) -> String {
    let mut stable = result.clone();
    if let Value::Object(m) = &mut stable {
        // Timings (any `*_ms` field) and bookkeeping are measurements, not meaning.
        m.retain(|k, _| !k.ends_with("_ms") && !VOLATILE_FIELDS.contains(&k.as_str()));
        m.remove("files");
    }
    let files_json = serde_json::to_value(files).unwrap_or(Value::Null);
    hash_hex(canonical_json(&serde_json::json!({"result": stable, "files": files_json})).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_is_order_independent() {
        let a = json!({"b": 1, "a": [1, {"y": 2, "x": 1}]});
        let b: Value = serde_json::from_str(r#"{"a":[1,{"x":1,"y":2}],"b":1}"#).unwrap();
        assert_eq!(canonical_json(&a), canonical_json(&b));
    }

    #[test]
    fn diff_names_the_change() {
        let mut a = KeyComponents::new();
        a.set("input:w.py", "aa");
        let mut b = a.clone();
        b.set("input:w.py", "bb");
        b.set("salt", "x");
        assert_ne!(a.key(), b.key());
        let d = b.diff(&a);
        assert_eq!(d.len(), 2);
        assert!(d[0].to_string().contains("input file w.py changed"));
    }

    #[test]
    fn volatile_fields_do_not_change_the_digest() {
        let files = BTreeMap::new();
        let a = output_digest(&json!({"status": "ok", "compile_ms": 1.0}), &files);
        let b = output_digest(&json!({"status": "ok", "compile_ms": 2.0}), &files);
        let c = output_digest(&json!({"status": "bad", "compile_ms": 2.0}), &files);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
