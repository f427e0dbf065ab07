//! The persister: what a build writes to the run database, batched.
//!
//! Finished steps queue their writes; the scheduler flushes the queue once per batch of steps
//! that finished together (one transaction). A step's files are in the CAS before its record is
//! queued, and a key lock is released only after the record is flushed, so a build killed at any
//! point leaves records that name only whole blobs, and loses at most the last batch (those steps
//! run again next time).
//!
//! A no-op build writes one row: its run. The run row is inserted when the first write needs its
//! id, or at the end.

use std::collections::HashMap;

use crate::cache::{Db, Write};
use crate::error::Result;
use crate::key::KeyComponents;
use crate::outcome::status::StepStatus;

pub struct Persister<'a> {
    db: &'a Db,
    command: String,
    fingerprint: String,
    started_at: f64,
    run_id: Option<i64>,
    /// Step id -> latest key, as of the start of the build (kept up to date).
    latest: HashMap<String, String>,
    pending: Vec<Write>,
}

impl<'a> Persister<'a> {
    pub fn new(db: &'a Db, command: &str, fingerprint: &str) -> Result<Self> {
        Ok(Persister {
            db,
            command: command.to_string(),
            fingerprint: fingerprint.to_string(),
            started_at: crate::cache::db::now(),
            run_id: None,
            latest: db.latest_key_map()?,
            pending: Vec::new(),
        })
    }

    /// This build's run id (inserting its row now if no write needed it before).
    pub fn run_id(&mut self) -> Result<i64> {
        if let Some(id) = self.run_id {
            return Ok(id);
        }
        let id = self.db.start_run(&self.command, &self.fingerprint)?;
        self.run_id = Some(id);
        Ok(id)
    }

    /// A step served from the cache: recorded only when it changes the step's latest key.
    pub fn cache_hit(
        &mut self,
        step_id: &str,
        key: &str,
        comps: &KeyComponents,
        status: StepStatus,
    ) -> Result<()> {
        if self.latest.get(step_id).map(String::as_str) == Some(key) {
            return Ok(());
        }
        self.latest.insert(step_id.to_string(), key.to_string());
        let run_id = self.run_id()?;
        self.pending.push(Write::Latest {
            step_id: step_id.to_string(),
            key: key.to_string(),
            components: comps.clone(),
        });
        self.pending.push(Write::StepResult {
            run_id,
            step_id: step_id.to_string(),
            key: key.to_string(),
            status: status.as_str().to_string(),
            cached: true,
            duration_ms: 0.0,
        });
        Ok(())
    }

    /// A step that ran: its record (when kept), samples and result row.
    pub fn ran(
        &mut self,
        record: Option<crate::cache::ActionRecord>,
        samples: Option<(Vec<f64>, Vec<f64>)>,
        step_id: &str,
        key: &str,
        status: StepStatus,
        duration_ms: f64,
    ) -> Result<()> {
        let run_id = self.run_id()?;
        if let Some((device_ms, wall_ms)) = samples {
            self.pending.push(Write::Samples {
                key: key.to_string(),
                run_id,
                device_ms,
                wall_ms,
            });
        }
        if let Some(rec) = record {
            self.latest.insert(step_id.to_string(), key.to_string());
            self.pending.push(Write::Action(rec));
        }
        self.pending.push(Write::StepResult {
            run_id,
            step_id: step_id.to_string(),
            key: key.to_string(),
            status: status.as_str().to_string(),
            cached: false,
            duration_ms,
        });
        Ok(())
    }

    /// Commit everything queued (one transaction).
    pub fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let writes = std::mem::take(&mut self.pending);
        self.db.write_batch(&writes)
    }

    /// Flush and close the run; returns its id.
    pub fn finish(mut self, status: &str) -> Result<i64> {
        self.flush()?;
        match self.run_id {
            Some(id) => {
                self.db.finish_run(id, status)?;
                Ok(id)
            }
            None => self.db.insert_finished_run(
                self.started_at,
                &self.command,
                &self.fingerprint,
                status,
            ),
        }
    }
}
