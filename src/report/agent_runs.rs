//! Agent studies as report methods: every `jb agent` run in the run database's agent tables
//! (`agent_runs`, `agent_samples`) becomes one method whose samples are the run's, in the
//! method's order. A study run again under the same name counts once: its newest run that
//! recorded samples.

use std::collections::{BTreeMap, HashSet};

use super::methods::{MethodData, MethodSample, MethodSource, Outcome};
use super::records::RecordSet;
use super::ReportError;
use crate::agent::store::{SampleRow, Store};
use crate::cache::Cache;
use crate::stats::Speedup;

/// The agent runs of the run database (nothing without a cache: the `aggregate` step).
pub struct AgentRuns;

/// The report's outcome class of an agent sample's outcome (`jb agent`'s classes).
fn outcome_of(row: &SampleRow) -> Outcome {
    match row.outcome.as_str() {
        "api_error" | "no_code" | "compile_error" => Outcome::CompileError,
        "runtime_error" => Outcome::RuntimeError,
        "incorrect" => Outcome::WrongOutput,
        "correct_slower" | "correct_faster" | "correct_unmeasured" => Outcome::Correct,
        _ => Outcome::NotEvaluated,
    }
}

/// One stored sample as a report sample (`index` from 1).
pub fn sample_of(row: &SampleRow) -> MethodSample {
    let outcome = outcome_of(row);
    let status = match (&row.eval_status, outcome) {
        (Some(s), _) => s.clone(),
        // No code came back: the agent-level outcome is the status.
        (None, _) => row.outcome.clone(),
    };
    // A correct sample whose timing came from the candidate's own process carries no number.
    let unmeasured = (row.outcome == "correct_unmeasured").then(|| {
        "timed where candidate code ran (trust not artifact): no speedup counts".to_string()
    });
    let correct = outcome == Outcome::Correct && unmeasured.is_none();
    MethodSample {
        index: row.number + 1,
        status,
        outcome,
        median_ms: row.kernel_ms.filter(|_| correct),
        speedup: row.speedup.filter(|_| correct),
        // The study stores the paired speedup's point: the report keeps it as such.
        paired_xla: row.speedup.filter(|_| correct).map(Speedup::point),
        paired_handtuned: None,
        label: row.tag.clone(),
        step: None,
        key: row.translate_key.clone(),
        interpret: false,
        trust: None,
        unmeasured,
    }
}

impl MethodSource for AgentRuns {
    fn load(
        &self,
        _records: &RecordSet,
        cache: Option<&Cache>,
    ) -> Result<Vec<MethodData>, ReportError> {
        let Some(cache) = cache else {
            return Ok(Vec::new());
        };
        // Reading creates nothing: a cache without studies stays as it was.
        let Some(store) = Store::open_existing(&cache.dir)? else {
            return Ok(Vec::new());
        };
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        // Newest first: the first run of a name with samples is the one reported.
        for run in store.runs()? {
            let (Some(id), Some(name), Some(method)) = (
                run["run_id"].as_i64(),
                run["name"].as_str(),
                run["method"].as_str(),
            ) else {
                continue;
            };
            if seen.contains(name) {
                continue;
            }
            let rows = store.samples(id)?;
            if rows.is_empty() {
                continue;
            }
            seen.insert(name.to_string());
            let mut samples: BTreeMap<String, Vec<MethodSample>> = BTreeMap::new();
            for row in &rows {
                samples
                    .entry(row.workload.clone())
                    .or_default()
                    .push(sample_of(row));
            }
            out.push(MethodData {
                name: name.to_string(),
                description: format!(
                    "agent study `{name}` (method {method}, run {id} of the run database: {} sample(s))",
                    rows.len()
                ),
                samples,
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}
