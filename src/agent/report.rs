//! What `jb agent --json` prints: the run, its accounting and every sample's row.

use serde::Serialize;
use serde_json::Value;

use super::accounting::{BenchmarkSummary, MethodSummary};
use super::store::SampleRow;

/// A finished agent run (`jb agent --json`).
#[derive(Debug, Clone, Serialize)]
pub struct AgentReport {
    pub run_id: i64,
    pub name: String,
    pub method: String,
    pub params: Value,
    pub agent: Value,
    pub budget: usize,
    pub requests: u64,
    pub cached_responses: u64,
    pub summary: MethodSummary,
    pub benchmarks: Vec<BenchmarkDetail>,
}

/// One benchmark's summary with its samples' rows.
#[derive(Debug, Clone, Serialize)]
pub struct BenchmarkDetail {
    #[serde(flatten)]
    pub summary: BenchmarkSummary,
    pub samples_detail: Vec<SampleRow>,
}

impl BenchmarkDetail {
    /// Each benchmark with the rows of its samples.
    pub fn all(summaries: &[BenchmarkSummary], rows: &[SampleRow]) -> Vec<BenchmarkDetail> {
        summaries
            .iter()
            .map(|b| BenchmarkDetail {
                summary: b.clone(),
                samples_detail: rows
                    .iter()
                    .filter(|r| r.workload == b.workload)
                    .cloned()
                    .collect(),
            })
            .collect()
    }
}
