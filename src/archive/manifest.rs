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
    /// The digest of what the output digest leaves out: the record's timings (every `*_ms` and
    /// other volatile result field), its samples and its bookkeeping. With the signature over
    /// the manifest, it says these measurements are the producer's.
    pub measurements: String,
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

    /// The digest of the record's measurements: the result fields the output digest leaves
    /// out, the samples, the creation time and duration.
    pub fn measurements_digest(&self) -> String {
        let volatile: serde_json::Map<String, Value> = match &self.result {
            Value::Object(m) => m
                .iter()
                .filter(|(k, _)| {
                    k.ends_with("_ms") || crate::key::VOLATILE_FIELDS.contains(&k.as_str())
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            _ => serde_json::Map::new(),
        };
        let v = serde_json::json!({
            "volatile": volatile,
            "samples": self.samples,
            "created_at": self.created_at,
            "duration_ms": self.duration_ms,
        });
        crate::key::hash_hex(crate::key::canonical_json(&v).as_bytes())
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

/// `tables/<name>.json`: an extension table of the run database, as data: its columns (names and
/// types from a fixed set), its primary key and its rows. Import creates the table from this
/// list (never from SQL the archive carries).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableDump {
    pub name: String,
    pub columns: Vec<Column>,
    /// Column names, in key order (empty: no primary key).
    #[serde(default)]
    pub primary_key: Vec<String>,
    pub rows: Vec<Vec<Value>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Column {
    pub name: String,
    /// One of [`COLUMN_TYPES`].
    #[serde(rename = "type")]
    pub ty: String,
}

/// The column types an archived table may declare (SQLite's type affinities).
pub const COLUMN_TYPES: &[&str] = &["INTEGER", "REAL", "TEXT", "BLOB", "NUMERIC"];

/// Most columns of one archived table.
pub const MAX_COLUMNS: usize = 256;

impl TableDump {
    /// The table as data jb can create: a valid, non-core name, valid and distinct column
    /// names, known types, a primary key of its own columns, rows of the right width holding
    /// scalars (or `{"blob_hex": ...}`).
    pub fn validate(&self) -> Result<(), String> {
        use super::entry::is_ident;
        if !is_ident(&self.name) {
            return Err(format!(
                "table name {:?} is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*, at most 64)",
                self.name
            ));
        }
        let lower = self.name.to_ascii_lowercase();
        if lower.starts_with("sqlite_") || super::rows::CORE_TABLES.contains(&lower.as_str()) {
            return Err(format!(
                "table name `{}` is reserved (a core or SQLite table)",
                self.name
            ));
        }
        if self.columns.is_empty() || self.columns.len() > MAX_COLUMNS {
            return Err(format!(
                "table `{}`: {} columns (1 to {MAX_COLUMNS} allowed)",
                self.name,
                self.columns.len()
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for c in &self.columns {
            if !is_ident(&c.name) {
                return Err(format!(
                    "table `{}`: column name {:?} is not a plain identifier",
                    self.name, c.name
                ));
            }
            if !seen.insert(c.name.to_ascii_lowercase()) {
                return Err(format!(
                    "table `{}`: column `{}` appears twice",
                    self.name, c.name
                ));
            }
            if !COLUMN_TYPES.contains(&c.ty.as_str()) {
                return Err(format!(
                    "table `{}`: column `{}` has type {:?} (allowed: {})",
                    self.name,
                    c.name,
                    c.ty,
                    COLUMN_TYPES.join(", ")
                ));
            }
        }
        let mut pk = std::collections::BTreeSet::new();
        for k in &self.primary_key {
            if !self.columns.iter().any(|c| &c.name == k) || !pk.insert(k) {
                return Err(format!(
                    "table `{}`: primary key column {:?} is not one of its columns (or repeated)",
                    self.name, k
                ));
            }
        }
        for (i, row) in self.rows.iter().enumerate() {
            if row.len() != self.columns.len() {
                return Err(format!(
                    "table `{}`: row {i} has {} values for {} columns",
                    self.name,
                    row.len(),
                    self.columns.len()
                ));
            }
            for v in row {
                let ok = match v {
                    Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => true,
                    Value::Object(m) => {
                        m.len() == 1
                            && m.get("blob_hex").and_then(Value::as_str).is_some_and(|h| {
                                h.len() % 2 == 0 && h.bytes().all(|b| b.is_ascii_hexdigit())
                            })
                    }
                    Value::Array(_) => false,
                };
                if !ok {
                    return Err(format!(
                        "table `{}`: row {i} holds a value that is not a scalar: {}",
                        self.name,
                        super::entry::shown(v.to_string().as_bytes())
                    ));
                }
            }
        }
        Ok(())
    }
}
