//! Running one ready step in a blocking task: wait for an identical in-flight step (key lock)
//! and re-check the cache, hold the device lock for a measurement, execute.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crate::cache::{ActionRecord, Cache};
use crate::exec::{Executor, StepOutput, StepRequest};
use crate::key::KeyComponents;

use super::admission::Grant;
use super::decide::usable_record;
use super::locks::{self, Acquired, FileLock};

/// What a task did.
#[derive(Debug)]
pub enum TaskOutcome {
    Ran(StepOutput),
    /// Another build finished the same step (same key) while this one waited for it.
    FoundCached(Box<ActionRecord>),
}

/// A step whose task ended: consumed by the persister (records) and the reporter (progress,
/// summary).
#[derive(Debug)]
pub struct FinishedStep {
    pub idx: usize,
    pub key: String,
    pub comps: KeyComponents,
    pub reason: String,
    pub outcome: TaskOutcome,
    pub duration_ms: f64,
    pub out_dir: PathBuf,
    pub grant: Grant,
    /// Held until the step's record is committed.
    pub key_lock: Option<FileLock>,
}

/// Everything a task needs (owned: it runs on a blocking thread).
pub struct Task {
    pub idx: usize,
    pub key: String,
    pub comps: KeyComponents,
    pub reason: String,
    pub grant: Grant,
    pub request: StepRequest,
    pub cache: Arc<Cache>,
    pub executor: Arc<dyn Executor>,
    pub remeasure: bool,
}

fn lock_error(what: &str, e: std::io::Error) -> StepOutput {
    StepOutput::infra("error", format!("cannot take the {what} lock: {e}"))
}

impl Task {
    pub fn run(self) -> FinishedStep {
        let (outcome, key_lock, duration_ms) = self.locked_execute();
        FinishedStep {
            idx: self.idx,
            key: self.key,
            comps: self.comps,
            reason: self.reason,
            outcome,
            duration_ms,
            out_dir: self.request.out_dir,
            grant: self.grant,
            key_lock,
        }
    }

    /// The outcome, the key lock (still held) and the execution time in milliseconds.
    fn locked_execute(&self) -> (TaskOutcome, Option<FileLock>, f64) {
        let req = &self.request;
        let cancelled = || TaskOutcome::Ran(StepOutput::infra("cancelled", "interrupted"));
        let key_lock = match locks::acquire_key(&self.cache.dir, &self.key, &req.cancel) {
            Ok(Acquired::Cancelled) => return (cancelled(), None, 0.0),
            Ok(a) => a.into_lock(),
            Err(e) => return (TaskOutcome::Ran(lock_error("step", e)), None, 0.0),
        };
        // An identical step may have finished elsewhere since this build decided to run it.
        if let Ok(Some(rec)) = usable_record(&self.cache, &req.step, &self.key, self.remeasure) {
            return (TaskOutcome::FoundCached(Box::new(rec)), key_lock, 0.0);
        }
        let mut device_locks = Vec::new();
        // Every device unit held is also a lock file: two jb processes on one machine never
        // measure at once, nor (TPU, GPU) open one chip from two judges.
        {
            for &u in &self.grant.devices {
                let path = locks::device_lock_path(&self.cache.dir, u);
                match locks::acquire(&path, &req.cancel) {
                    Ok(Acquired::Cancelled) => return (cancelled(), key_lock, 0.0),
                    Ok(a) => device_locks.extend(a.into_lock()),
                    Err(e) => return (TaskOutcome::Ran(lock_error("device", e)), key_lock, 0.0),
                }
            }
        }
        let t0 = Instant::now();
        let out = self.executor.execute(req);
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        drop(device_locks);
        (TaskOutcome::Ran(out), key_lock, ms)
    }
}
