//! Search-space files (`space.yaml`) of the hand-tuned baselines, read without Python.

use std::path::Path;

use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::Value;

use super::error::{utf8_text, PipelineError};
use crate::error::{JbError, Result};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpaceFile {
    pub kernel: Option<String>,
    #[serde(default)]
    pub defaults: IndexMap<String, Value>,
    pub space: IndexMap<String, ScaleSpace>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleSpace {
    pub params: IndexMap<String, Vec<Value>>,
    pub filter: Option<String>,
}

/// One configuration of a space: a stable name and the full parameter object (defaults merged).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub name: String,
    pub params: serde_json::Map<String, Value>,
}

pub fn load_space(path: &Path) -> Result<SpaceFile> {
    let bytes = std::fs::read(path).map_err(|e| JbError::io(path, e))?;
    let text = utf8_text(path, bytes)?;
    Ok(serde_norway::from_str(&text)
        .map_err(|e| PipelineError::from_serde(path, &text, None, &e))?)
}

pub fn value_name(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl SpaceFile {
    /// The defaults as a configuration.
    pub fn default_config(&self) -> Config {
        let params: serde_json::Map<String, Value> = self.defaults.clone().into_iter().collect();
        Config {
            name: "default".into(),
            params,
        }
    }

    /// Every configuration at `scale` that passes the filter, in a stable order.
    pub fn configs(&self, scale: &str, path: &Path) -> Result<Vec<Config>> {
        let Some(space) = self.space.get(scale) else {
            return Err(JbError::pipeline(
                path,
                1,
                1,
                format!(
                    "no search space for scale `{scale}` (has: {})",
                    self.space.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            ));
        };
        let mut combos: Vec<Vec<(String, Value)>> = vec![vec![]];
        for (name, values) in &space.params {
            let mut next = Vec::with_capacity(combos.len() * values.len());
            for combo in &combos {
                for v in values {
                    let mut c = combo.clone();
                    c.push((name.clone(), v.clone()));
                    next.push(c);
                }
            }
            combos = next;
        }
        let mut out = Vec::new();
        for combo in combos {
            if let Some(filter) = &space.filter {
                if !eval_filter(filter, &combo).map_err(|m| JbError::pipeline(path, 1, 1, m))? {
                    continue;
                }
            }
            let name = combo
                .iter()
                .map(|(k, v)| format!("{k}={}", value_name(v)))
                .collect::<Vec<_>>()
                .join(",");
            let mut params: serde_json::Map<String, Value> =
                self.defaults.clone().into_iter().collect();
            for (k, v) in combo {
                params.insert(k, v);
            }
            out.push(Config { name, params });
        }
        Ok(out)
    }
}

fn eval_filter(filter: &str, combo: &[(String, Value)]) -> std::result::Result<bool, String> {
    use evalexpr::{ContextWithMutableVariables, DefaultNumericTypes, HashMapContext};
    let mut ctx = HashMapContext::<DefaultNumericTypes>::new();
    for (k, v) in combo {
        let value = match v {
            Value::Number(n) if n.is_i64() => evalexpr::Value::Int(n.as_i64().unwrap_or_default()),
            Value::Number(n) => evalexpr::Value::Float(n.as_f64().unwrap_or_default()),
            Value::Bool(b) => evalexpr::Value::Boolean(*b),
            Value::String(s) => evalexpr::Value::String(s.clone()),
            other => {
                return Err(format!(
                    "parameter `{k}`: unsupported value {other} in a filter"
                ))
            }
        };
        ctx.set_value(k.clone(), value)
            .map_err(|e| format!("filter `{filter}`: {e}"))?;
    }
    evalexpr::eval_boolean_with_context(filter, &ctx).map_err(|e| format!("filter `{filter}`: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn product_filter_and_defaults() {
        let text = "defaults: {bm: 1024, bn: 2048, bk: 1024, extra: 1}\nspace:\n  paper:\n    params: {bm: [256, 512, 1024], bn: [512, 1024, 2048], bk: [256, 512, 1024]}\n    filter: \"bm*bk <= 1024*1024 && bk*bn <= 2048*1024\"\n";
        let s: SpaceFile = serde_norway::from_str(text).unwrap();
        let cfgs = s.configs("paper", Path::new("x")).unwrap();
        assert_eq!(cfgs.len(), 27);
        assert_eq!(cfgs[0].name, "bm=256,bn=512,bk=256");
        assert_eq!(cfgs[0].params["extra"], 1);
        assert!(s.configs("cpu", Path::new("x")).is_err());
    }
}
