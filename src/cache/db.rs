//! The SQLite run database: action records (key -> result), the latest key of every step, runs,
//! per-run step results and measurement samples.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;

use crate::error::{JbError, Result};
use crate::key::KeyComponents;

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS actions (
    key TEXT PRIMARY KEY,
    step_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    output_digest TEXT NOT NULL,
    result TEXT NOT NULL,
    files TEXT NOT NULL,
    components TEXT NOT NULL,
    created_at REAL NOT NULL,
    duration_ms REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS actions_step ON actions(step_id);
CREATE TABLE IF NOT EXISTS latest (
    step_id TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    components TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    run_id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at REAL NOT NULL,
    finished_at REAL,
    command TEXT NOT NULL,
    status TEXT,
    fingerprint TEXT
);
CREATE TABLE IF NOT EXISTS step_results (
    run_id INTEGER NOT NULL,
    step_id TEXT NOT NULL,
    key TEXT NOT NULL,
    status TEXT NOT NULL,
    cached INTEGER NOT NULL,
    duration_ms REAL NOT NULL,
    PRIMARY KEY (run_id, step_id)
);
CREATE TABLE IF NOT EXISTS samples (
    key TEXT NOT NULL,
    run_id INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    device_ms REAL,
    wall_ms REAL
);
CREATE INDEX IF NOT EXISTS samples_key ON samples(key);
"#;

#[derive(Debug, Clone, PartialEq)]
pub struct ActionRecord {
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
}

/// One write of a build's batch (see [`Db::write_batch`]).
#[derive(Debug, Clone)]
pub enum Write {
    /// An action record, which also becomes its step's latest.
    Action(ActionRecord),
    /// A cache hit under new components becomes the step's latest.
    Latest {
        step_id: String,
        key: String,
        components: KeyComponents,
    },
    StepResult {
        run_id: i64,
        step_id: String,
        key: String,
        status: String,
        cached: bool,
        duration_ms: f64,
    },
    Samples {
        key: String,
        run_id: i64,
        device_ms: Vec<f64>,
        wall_ms: Vec<f64>,
    },
}

fn insert_action(tx: &rusqlite::Transaction<'_>, rec: &ActionRecord) -> Result<()> {
    let components = serde_json::to_string(&rec.components).map_err(json_err)?;
    tx.execute(
        "INSERT OR REPLACE INTO actions (key, step_id, kind, status, output_digest, result, files, components, created_at, duration_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            rec.key,
            rec.step_id,
            rec.kind,
            rec.status,
            rec.output_digest,
            serde_json::to_string(&rec.result).map_err(json_err)?,
            serde_json::to_string(&rec.files).map_err(json_err)?,
            components,
            rec.created_at,
            rec.duration_ms
        ],
    )?;
    tx.execute(
        "INSERT OR REPLACE INTO latest (step_id, key, components, updated_at) VALUES (?1, ?2, ?3, ?4)",
        params![rec.step_id, rec.key, components, now()],
    )?;
    Ok(())
}

/// (key, step id, files: name -> digest) of one action record.
pub type ActionFiles = (String, String, BTreeMap<String, String>);

pub struct Db {
    conn: Mutex<Connection>,
}

pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn json_err(e: serde_json::Error) -> JbError {
    JbError::Cache(format!("bad JSON in the run database: {e}"))
}

/// Open the run database for use beside other jb processes: a minute's busy timeout, WAL, and
/// `schema` (if any) created. Switching a new database to WAL takes an exclusive lock for which
/// SQLite does not call the busy handler: two jb processes opening a fresh cache at once retry.
pub(crate) fn open_shared(path: &Path, schema: Option<&str>) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(60))?;
    retry_busy(|| {
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
    })?;
    if let Some(schema) = schema {
        retry_busy(|| conn.execute_batch(schema))?;
    }
    Ok(conn)
}

/// Run `f` again while SQLite answers "busy"/"locked" without waiting (up to a minute).
fn retry_busy<T>(mut f: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        match f() {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(
                    e.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

impl Db {
    pub fn open(path: &Path) -> Result<Db> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| JbError::io(parent, e))?;
        }
        let conn = open_shared(path, None)?;
        // WAL with synchronous=NORMAL: a commit is not fsynced (a process killed at any point
        // loses nothing committed; a power cut may lose the last commits, whose steps then run
        // again). Closing does not checkpoint: SQLite checkpoints every ~1000 pages instead, so
        // a small build writes only its own pages.
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
            true,
        )?;
        retry_busy(|| conn.execute_batch(SCHEMA))?;
        Ok(Db {
            conn: Mutex::new(conn),
        })
    }

    pub(crate) fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get_action(&self, key: &str) -> Result<Option<ActionRecord>> {
        let conn = self.conn();
        let row = conn
            .query_row(
                "SELECT key, step_id, kind, status, output_digest, result, files, components, created_at, duration_ms FROM actions WHERE key = ?1",
                params![key],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, String>(4)?,
                        r.get::<_, String>(5)?,
                        r.get::<_, String>(6)?,
                        r.get::<_, String>(7)?,
                        r.get::<_, f64>(8)?,
                        r.get::<_, f64>(9)?,
                    ))
                },
            )
            .optional()?;
        let Some((
            key,
            step_id,
            kind,
            status,
            output_digest,
            result,
            files,
            components,
            created_at,
            duration_ms,
        )) = row
        else {
            return Ok(None);
        };
        Ok(Some(ActionRecord {
            key,
            step_id,
            kind,
            status,
            output_digest,
            result: serde_json::from_str(&result).map_err(json_err)?,
            files: serde_json::from_str(&files).map_err(json_err)?,
            components: serde_json::from_str(&components).map_err(json_err)?,
            created_at,
            duration_ms,
        }))
    }

    /// Store a record and make it the step's latest (one transaction).
    pub fn put_action(&self, rec: &ActionRecord) -> Result<()> {
        self.write_batch(&[Write::Action(rec.clone())])
    }

    /// Apply writes in one transaction (all or nothing).
    pub fn write_batch(&self, writes: &[Write]) -> Result<()> {
        if writes.is_empty() {
            return Ok(());
        }
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        for w in writes {
            match w {
                Write::Action(rec) => insert_action(&tx, rec)?,
                Write::Latest {
                    step_id,
                    key,
                    components,
                } => {
                    let components = serde_json::to_string(components).map_err(json_err)?;
                    tx.execute(
                        "INSERT OR REPLACE INTO latest (step_id, key, components, updated_at) VALUES (?1, ?2, ?3, ?4)",
                        params![step_id, key, components, now()],
                    )?;
                }
                Write::StepResult {
                    run_id,
                    step_id,
                    key,
                    status,
                    cached,
                    duration_ms,
                } => {
                    tx.execute(
                        "INSERT OR REPLACE INTO step_results (run_id, step_id, key, status, cached, duration_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                        params![run_id, step_id, key, status, *cached as i64, duration_ms],
                    )?;
                }
                Write::Samples {
                    key,
                    run_id,
                    device_ms,
                    wall_ms,
                } => {
                    let n = device_ms.len().max(wall_ms.len());
                    for i in 0..n {
                        tx.execute(
                            "INSERT INTO samples (key, run_id, idx, device_ms, wall_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
                            params![key, run_id, i as i64, device_ms.get(i), wall_ms.get(i)],
                        )?;
                    }
                }
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Every step's latest key (one read at the start of a build).
    pub fn latest_key_map(&self) -> Result<std::collections::HashMap<String, String>> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT step_id, key FROM latest")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    /// Record a whole run in one row (a build that wrote nothing else).
    pub fn insert_finished_run(
        &self,
        started_at: f64,
        command: &str,
        fingerprint: &str,
        status: &str,
    ) -> Result<i64> {
        let conn = self.conn();
        conn.execute(
            "INSERT INTO runs (started_at, finished_at, command, status, fingerprint) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![started_at, now(), command, status, fingerprint],
        )?;
        Ok(conn.last_insert_rowid())
    }

    /// Mark `key` as the latest for `step_id` (a cache hit under new components).
    pub fn set_latest(&self, step_id: &str, key: &str, components: &KeyComponents) -> Result<()> {
        self.write_batch(&[Write::Latest {
            step_id: step_id.to_string(),
            key: key.to_string(),
            components: components.clone(),
        }])
    }

    pub fn latest(&self, step_id: &str) -> Result<Option<(String, KeyComponents)>> {
        let row: Option<(String, String)> = self
            .conn()
            .query_row(
                "SELECT key, components FROM latest WHERE step_id = ?1",
                params![step_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        match row {
            Some((k, c)) => Ok(Some((k, serde_json::from_str(&c).map_err(json_err)?))),
            None => Ok(None),
        }
    }

    /// The latest record of every step whose id starts with `prefix` ("" for all).
    pub fn latest_records(&self, prefix: &str) -> Result<Vec<ActionRecord>> {
        let keys: Vec<String> = {
            let conn = self.conn();
            let mut stmt = conn.prepare(
                "SELECT key FROM latest WHERE step_id LIKE ?1 ESCAPE '\\' ORDER BY step_id",
            )?;
            let pattern = format!(
                "{}%",
                prefix
                    .replace('\\', "\\\\")
                    .replace('%', "\\%")
                    .replace('_', "\\_")
            );
            let rows = stmt.query_map(params![pattern], |r| r.get::<_, String>(0))?;
            rows.collect::<std::result::Result<_, _>>()?
        };
        let mut out = Vec::new();
        for k in keys {
            if let Some(r) = self.get_action(&k)? {
                out.push(r);
            }
        }
        Ok(out)
    }

    pub fn start_run(&self, command: &str, fingerprint: &str) -> Result<i64> {
        let conn = self.conn();
        conn.execute(
            "INSERT INTO runs (started_at, command, fingerprint) VALUES (?1, ?2, ?3)",
            params![now(), command, fingerprint],
        )?;
        Ok(conn.last_insert_rowid())
    }

    pub fn finish_run(&self, run_id: i64, status: &str) -> Result<()> {
        self.conn().execute(
            "UPDATE runs SET finished_at = ?1, status = ?2 WHERE run_id = ?3",
            params![now(), status, run_id],
        )?;
        Ok(())
    }

    /// Add measurement samples under a key (re-measurements accumulate).
    pub fn add_samples(
        &self,
        key: &str,
        run_id: i64,
        device_ms: &[f64],
        wall_ms: &[f64],
    ) -> Result<()> {
        self.write_batch(&[Write::Samples {
            key: key.to_string(),
            run_id,
            device_ms: device_ms.to_vec(),
            wall_ms: wall_ms.to_vec(),
        }])
    }

    /// All samples of a key: (run_id, device_ms) in insertion order.
    pub fn samples(&self, key: &str) -> Result<Vec<(i64, f64)>> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT run_id, device_ms FROM samples WHERE key = ?1 AND device_ms IS NOT NULL ORDER BY rowid")?;
        let rows = stmt.query_map(params![key], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    pub fn all_actions(&self) -> Result<Vec<ActionFiles>> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT key, step_id, files FROM actions")?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (k, s, f) = row?;
            out.push((k, s, serde_json::from_str(&f).map_err(json_err)?));
        }
        Ok(out)
    }

    pub fn latest_keys(&self) -> Result<Vec<String>> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT key FROM latest")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    pub fn delete_action(&self, key: &str) -> Result<()> {
        let conn = self.conn();
        conn.execute("DELETE FROM actions WHERE key = ?1", params![key])?;
        conn.execute("DELETE FROM samples WHERE key = ?1", params![key])?;
        Ok(())
    }

    pub fn counts(&self) -> Result<BTreeMap<String, i64>> {
        let conn = self.conn();
        let mut out = BTreeMap::new();
        for t in ["actions", "latest", "runs", "step_results", "samples"] {
            let n: i64 = conn.query_row(&format!("SELECT COUNT(*) FROM {t}"), [], |r| r.get(0))?;
            out.insert(t.to_string(), n);
        }
        Ok(out)
    }
}
