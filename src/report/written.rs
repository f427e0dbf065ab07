//! What `jb report --json` prints: where the report went and a line per method.

use std::path::PathBuf;

use serde::Serialize;

use super::data::Report;

/// A written report (`jb report --json`).
#[derive(Debug, Clone, Serialize)]
pub struct Written {
    pub out: PathBuf,
    pub files: Vec<PathBuf>,
    pub workloads: usize,
    pub methods: Vec<MethodLine>,
    pub records: usize,
}

/// A method's headline numbers.
#[derive(Debug, Clone, Serialize)]
pub struct MethodLine {
    pub name: String,
    pub geomean: Option<f64>,
    pub mean: Option<f64>,
    pub correct: usize,
    pub benchmarks: usize,
}

impl Written {
    pub fn new(out: PathBuf, files: Vec<PathBuf>, report: &Report) -> Written {
        Written {
            out,
            files,
            workloads: report.workloads.len(),
            methods: report
                .methods
                .iter()
                .map(|m| MethodLine {
                    name: m.name.clone(),
                    geomean: m.geomean,
                    mean: m.mean,
                    correct: m.correct,
                    benchmarks: m.benchmarks,
                })
                .collect(),
            records: report.sources.len(),
        }
    }
}
