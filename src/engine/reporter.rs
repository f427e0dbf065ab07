//! The reporter: turns settled and finished steps into progress lines and the build summary.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::outcome::status::StepStatus;
use crate::pipeline::Step;

use super::{progress, StepReport};

pub struct Reporter {
    progress: progress::Progress,
    reports: BTreeMap<usize, StepReport>,
    /// Failed steps (cancelled ones are not failures).
    pub failed: usize,
}

/// How a step settled.
pub enum Settled {
    Blocked,
    Cached,
    Ran,
}

impl Reporter {
    pub fn new(mode: progress::Mode, total: usize) -> Reporter {
        Reporter {
            progress: progress::Progress::new(mode, total),
            reports: BTreeMap::new(),
            failed: 0,
        }
    }

    pub fn started(&mut self, id: &str, reason: &str) {
        self.progress.started(id, reason);
    }

    #[allow(clippy::too_many_arguments)]
    pub fn settled(
        &mut self,
        idx: usize,
        step: &Step,
        how: Settled,
        status: StepStatus,
        key: &str,
        duration_ms: f64,
        reason: String,
        result: Value,
    ) {
        match how {
            Settled::Blocked => self.progress.settled(&step.id, status.as_str(), "skipped"),
            Settled::Cached => self.progress.settled(&step.id, status.as_str(), "cached"),
            Settled::Ran => self
                .progress
                .finished(&step.id, status.as_str(), duration_ms, &result),
        }
        if status.is_failure() && !matches!(how, Settled::Blocked) {
            self.failed += 1;
        }
        self.reports.insert(
            idx,
            StepReport {
                step: step.id.clone(),
                kind: step.kind.as_str().into(),
                status,
                cached: matches!(how, Settled::Cached),
                key: key.to_string(),
                duration_ms,
                reason,
                result,
            },
        );
    }

    /// The step reports in build order.
    pub fn finish(mut self) -> Vec<StepReport> {
        self.progress.done();
        self.reports.into_values().collect()
    }
}
