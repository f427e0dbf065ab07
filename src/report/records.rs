//! The result records a report is made of, from the run database (`jb report`) or from a step's
//! upstream results (the `aggregate` step), with their step ids parsed back into variables.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::cache::ActionRecord;
use crate::outcome::DepResult;
use crate::pipeline::template::var_string;

/// One result record as the report sees it.
#[derive(Debug, Clone, Serialize)]
pub struct Rec {
    pub step_id: String,
    pub kind: String,
    pub status: String,
    /// The action key: the run-database row (`actions.key`) every number cited from it comes from.
    pub key: String,
    pub result: Value,
    /// The environment the result was computed in (`env:*` key components; empty for steps that
    /// do not depend on it, and for upstream results seen by an `aggregate` step).
    pub env: BTreeMap<String, String>,
    /// The `scale` key component, where there is one.
    pub scale: Option<String>,
    /// Input files named by the key (`input:*` components).
    pub inputs: Vec<String>,
}

impl Rec {
    pub fn from_action(rec: &ActionRecord) -> Rec {
        let mut env = BTreeMap::new();
        let mut inputs = Vec::new();
        let mut scale = None;
        for (name, value) in &rec.components.0 {
            if let Some(e) = name.strip_prefix("env:") {
                env.insert(e.to_string(), value.clone());
            } else if let Some(i) = name.strip_prefix("input:") {
                inputs.push(i.to_string());
            } else if name == "scale" {
                scale = Some(value.clone());
            }
        }
        Rec {
            step_id: rec.step_id.clone(),
            kind: rec.kind.clone(),
            status: rec.status.clone(),
            key: rec.key.clone(),
            result: rec.result.clone(),
            env,
            scale,
            inputs,
        }
    }

    pub fn from_dep(dep: &DepResult) -> Rec {
        Rec {
            step_id: dep.step_id.clone(),
            kind: dep.kind.clone(),
            status: dep.status.to_string(),
            key: dep.key.clone(),
            result: dep.result.clone(),
            env: BTreeMap::new(),
            scale: None,
            inputs: Vec::new(),
        }
    }

    pub fn f64(&self, field: &str) -> Option<f64> {
        self.result.get(field).and_then(Value::as_f64)
    }

    pub fn reasons(&self) -> Vec<String> {
        self.result
            .get("reasons")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|r| {
                        r.as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| r.to_string())
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn interpret(&self) -> bool {
        self.result.get("interpret").and_then(Value::as_bool) == Some(true)
    }
}

/// A step id split into its parts: `pipeline/name[var=value,...]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRef {
    pub pipeline: String,
    pub name: String,
    pub vars: BTreeMap<String, String>,
}

/// Variables whose values never contain a comma: a `,name=` that follows one of them starts the
/// next variable. Any other variable's value (a grid `config` such as `bm=256,bn=512`) runs up
/// to the next one of these, or to the end.
const SIMPLE_VARS: &[&str] = &[
    "workload",
    "candidate",
    "method",
    "sample",
    "chain",
    "turn",
    "beam",
    "seed",
    "n",
];

/// Parse a step id. Ids without brackets have no variables.
pub fn parse_step_id(id: &str) -> StepRef {
    let (head, inner) = match id.split_once('[') {
        Some((h, rest)) => (h, rest.strip_suffix(']').unwrap_or(rest)),
        None => (id, ""),
    };
    let (pipeline, name) = head.split_once('/').unwrap_or(("", head));
    let mut vars = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for token in inner.split(',').filter(|t| !t.is_empty()) {
        let starts_var = token.split_once('=').filter(|(k, _)| {
            current.is_none()
                || SIMPLE_VARS.contains(k)
                || current
                    .as_ref()
                    .is_some_and(|(c, _)| SIMPLE_VARS.contains(&c.as_str()))
        });
        match starts_var {
            Some((k, v)) => {
                if let Some((ck, cv)) = current.take() {
                    vars.insert(ck, cv);
                }
                current = Some((k.to_string(), v.to_string()));
            }
            None => {
                if let Some((_, cv)) = current.as_mut() {
                    cv.push(',');
                    cv.push_str(token);
                }
            }
        }
    }
    if let Some((k, v)) = current {
        vars.insert(k, v);
    }
    StepRef {
        pipeline: pipeline.to_string(),
        name: name.to_string(),
        vars,
    }
}

/// The records of one report, by step id, with their parsed ids.
#[derive(Debug, Clone, Default)]
pub struct RecordSet {
    by_id: BTreeMap<String, (StepRef, Rec)>,
}

impl RecordSet {
    pub fn new(records: impl IntoIterator<Item = Rec>) -> RecordSet {
        let by_id = records
            .into_iter()
            .map(|r| (r.step_id.clone(), (parse_step_id(&r.step_id), r)))
            .collect();
        RecordSet { by_id }
    }

    pub fn from_actions(records: &[ActionRecord]) -> RecordSet {
        RecordSet::new(records.iter().map(Rec::from_action))
    }

    /// Upstream results, with the variables the engine bound (exact, no parsing needed).
    pub fn from_deps(deps: &[DepResult]) -> RecordSet {
        let by_id = deps
            .iter()
            .map(|d| {
                let mut r = parse_step_id(&d.step_id);
                r.vars = d
                    .vars
                    .iter()
                    .filter(|(k, _)| k.as_str() != "config_params")
                    .map(|(k, v)| (k.clone(), var_string(v)))
                    .collect();
                (d.step_id.clone(), (r, Rec::from_dep(d)))
            })
            .collect();
        RecordSet { by_id }
    }

    pub fn get(&self, step_id: &str) -> Option<&Rec> {
        self.by_id.get(step_id).map(|(_, r)| r)
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&StepRef, &Rec)> {
        self.by_id.values().map(|(s, r)| (s, r))
    }

    /// The record of `pipeline/name` for `workload` among steps with exactly these variables
    /// (`extra` beside the workload).
    pub fn find(
        &self,
        pipeline: &str,
        name: &str,
        workload: &str,
        extra: &[(&str, &str)],
    ) -> Option<&Rec> {
        self.iter()
            .find(|(s, _)| {
                s.pipeline == pipeline
                    && s.name == name
                    && s.vars.get("workload").map(String::as_str) == Some(workload)
                    && s.vars.len() == 1 + extra.len()
                    && extra
                        .iter()
                        .all(|(k, v)| s.vars.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|(_, r)| r)
    }

    /// Every workload named by a record.
    pub fn workloads(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .iter()
            .filter_map(|(s, _)| s.vars.get("workload").cloned())
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ids_with_grid_configs() {
        let s = parse_step_id("tune/profile[workload=8p_GEMM,config=bm=256,bn=512,bk=256]");
        assert_eq!(s.pipeline, "tune");
        assert_eq!(s.name, "profile");
        assert_eq!(s.vars["workload"], "8p_GEMM");
        assert_eq!(s.vars["config"], "bm=256,bn=512,bk=256");
        let s = parse_step_id("tune/profile[config=bm=256,bn=512,workload=8p_GEMM]");
        assert_eq!(s.vars["config"], "bm=256,bn=512");
        assert_eq!(s.vars["workload"], "8p_GEMM");
        let s = parse_step_id("eval/verify[workload=8p_GEMM,candidate=gemm_pallas]");
        assert_eq!(s.vars["candidate"], "gemm_pallas");
        let s = parse_step_id("report/aggregate");
        assert_eq!(
            (s.pipeline.as_str(), s.name.as_str()),
            ("report", "aggregate")
        );
        assert!(s.vars.is_empty());
    }
}
