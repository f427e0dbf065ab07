//! The archive's manifest and the JSON forms of what it carries.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cache::ActionRecord;
use crate::key::KeyComponents;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub jb_version: String,
    /// Distinct environment fingerprints of the records (their `env:*` key components).
    pub environments: Vec<BTreeMap<String, String>>,
    /// Archive paths of the project's pipelines.
    pub pipelines: Vec<String>,
    /// Every record, with what its key and output digest must recompute to.
    pub records: Vec<RecordEntry>,
    /// Blobs a record names that the cache did not have (or had corrupt) at creation.
    pub missing_blobs: Vec<String>,
    /// Input files named by the records' keys: archive path -> original path and digest.
    pub sources: Vec<SourceEntry>,
    /// Inputs whose current content no longer matches any record's key (not archived).
    pub stale_sources: Vec<String>,
    pub tables: Vec<String>,
    /// Every other entry of the archive with its size and blake3 digest.
    pub entries: Vec<Entry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordEntry {
    pub step: String,
    pub key: String,
    pub kind: String,
    pub status: String,
    pub output_digest: String,
    /// Whether the key recomputes from the record's components and the output digest from its
    /// result and files (true for everything the engine stored).
    pub recomputable: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceEntry {
    pub entry: String,
    pub path: String,
    pub blake3: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub path: String,
    pub size: u64,
    pub blake3: String,
}

/// One measurement sample row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleRow {
    pub run_id: i64,
    pub idx: i64,
    pub device_ms: Option<f64>,
    pub wall_ms: Option<f64>,
}

/// `records/<key>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArchivedRecord {
    pub key: String,
    pub step_id: String,
    pub kind: String,
    pub status: String,
    pub output_digest: String,
    pub result: Value,
    pub files: BTreeMap<String, String>,
    pub components: KeyComponents,
    pub created_at: f64,
    pub duration_ms: f64,
    pub samples: Vec<SampleRow>,
}

impl ArchivedRecord {
    pub fn new(rec: ActionRecord, samples: Vec<SampleRow>) -> Self {
        ArchivedRecord {
            key: rec.key,
            step_id: rec.step_id,
            kind: rec.kind,
            status: rec.status,
            output_digest: rec.output_digest,
            result: rec.result,
            files: rec.files,
            components: rec.components,
            created_at: rec.created_at,
            duration_ms: rec.duration_ms,
            samples,
        }
    }

    pub fn action(&self) -> ActionRecord {
        ActionRecord {
            key: self.key.clone(),
            step_id: self.step_id.clone(),
            kind: self.kind.clone(),
            status: self.status.clone(),
            output_digest: self.output_digest.clone(),
            result: self.result.clone(),
            files: self.files.clone(),
            components: self.components.clone(),
            created_at: self.created_at,
            duration_ms: self.duration_ms,
        }
    }

    /// The key recomputes from the components and the output digest from result and files.
    pub fn recomputes(&self) -> bool {
        self.components.key() == self.key
            && crate::key::output_digest(&self.result, &self.files) == self.output_digest
    }
}

/// `latest.json`: one row per step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatestRow {
    pub step_id: String,
    pub key: String,
    pub components: KeyComponents,
}

/// `runs.json`: one row per run that measured an archived sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRow {
    pub run_id: i64,
    pub started_at: f64,
    pub finished_at: Option<f64>,
    pub command: String,
    pub status: Option<String>,
    pub fingerprint: Option<String>,
}

/// `tables/<name>.json`: an extension table of the run database.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableDump {
    pub name: String,
    /// Its `CREATE TABLE` statement.
    pub sql: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
}
