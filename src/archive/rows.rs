//! Run-database rows an archive carries beside the action records: samples, runs and extension
//! tables (tables other modules add to `jb.sqlite`, such as per-sample accounting of agent
//! methods), read and written generically.

use std::collections::BTreeMap;

use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{params, params_from_iter, OptionalExtension};
use serde_json::{json, Value};

use super::manifest::{RunRow, SampleRow, TableDump};
use super::ArchiveError;
use crate::cache::{ActionRecord, Db};
use crate::key::KeyComponents;

/// The tables of the core schema; every other table is an extension table.
pub const CORE_TABLES: &[&str] = &["actions", "latest", "runs", "step_results", "samples"];

pub fn samples(db: &Db, key: &str) -> Result<Vec<SampleRow>, ArchiveError> {
    let conn = db.conn();
    let mut stmt = conn.prepare(
        "SELECT run_id, idx, device_ms, wall_ms FROM samples WHERE key = ?1 ORDER BY rowid",
    )?;
    let rows = stmt.query_map(params![key], |r| {
        Ok(SampleRow {
            run_id: r.get(0)?,
            idx: r.get(1)?,
            device_ms: r.get(2)?,
            wall_ms: r.get(3)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub fn run(db: &Db, run_id: i64) -> Result<Option<RunRow>, ArchiveError> {
    let conn = db.conn();
    Ok(conn
        .query_row(
            "SELECT run_id, started_at, finished_at, command, status, fingerprint FROM runs WHERE run_id = ?1",
            params![run_id],
            |r| {
                Ok(RunRow {
                    run_id: r.get(0)?,
                    started_at: r.get(1)?,
                    finished_at: r.get(2)?,
                    command: r.get(3)?,
                    status: r.get(4)?,
                    fingerprint: r.get(5)?,
                })
            },
        )
        .optional()?)
}

/// Every (step id, key, components) of the `latest` table, by step id.
pub fn latest(db: &Db) -> Result<Vec<(String, String, KeyComponents)>, ArchiveError> {
    let conn = db.conn();
    let mut stmt = conn.prepare("SELECT step_id, key, components FROM latest ORDER BY step_id")?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (s, k, c) = row?;
        let comps = serde_json::from_str(&c).map_err(|e| ArchiveError::json("latest", e))?;
        out.push((s, k, comps));
    }
    Ok(out)
}

/// Store a record without touching the `latest` table.
pub fn insert_action(db: &Db, rec: &ActionRecord) -> Result<(), ArchiveError> {
    let j = |v: Result<String, serde_json::Error>| v.map_err(|e| ArchiveError::json(&rec.key, e));
    let result = j(serde_json::to_string(&rec.result))?;
    let files = j(serde_json::to_string(&rec.files))?;
    let components = j(serde_json::to_string(&rec.components))?;
    db.conn().execute(
        "INSERT OR REPLACE INTO actions (key, step_id, kind, status, output_digest, result, files, components, created_at, duration_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            rec.key,
            rec.step_id,
            rec.kind,
            rec.status,
            rec.output_digest,
            result,
            files,
            components,
            rec.created_at,
            rec.duration_ms
        ],
    )?;
    Ok(())
}

pub fn has_samples(db: &Db, key: &str) -> Result<bool, ArchiveError> {
    let n: i64 = db.conn().query_row(
        "SELECT COUNT(*) FROM samples WHERE key = ?1",
        params![key],
        |r| r.get(0),
    )?;
    Ok(n > 0)
}

/// A run row (as archived) under a fresh id; returns the id.
pub fn insert_run(db: &Db, run: &RunRow, command: &str) -> Result<i64, ArchiveError> {
    let conn = db.conn();
    conn.execute(
        "INSERT INTO runs (started_at, finished_at, command, status, fingerprint) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![run.started_at, run.finished_at, command, run.status, run.fingerprint],
    )?;
    Ok(conn.last_insert_rowid())
}

pub fn insert_samples(
    db: &Db,
    key: &str,
    rows: &[SampleRow],
    run_ids: &BTreeMap<i64, i64>,
) -> Result<(), ArchiveError> {
    let mut conn = db.conn();
    let tx = conn.transaction()?;
    for s in rows {
        let run_id = run_ids.get(&s.run_id).copied().unwrap_or(s.run_id);
        tx.execute(
            "INSERT INTO samples (key, run_id, idx, device_ms, wall_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![key, run_id, s.idx, s.device_ms, s.wall_ms],
        )?;
    }
    tx.commit()?;
    Ok(())
}

fn to_json(v: ValueRef) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => json!(i),
        ValueRef::Real(f) => json!(f),
        ValueRef::Text(t) => json!(String::from_utf8_lossy(t)),
        ValueRef::Blob(b) => {
            json!({"blob_hex": b.iter().map(|x| format!("{x:02x}")).collect::<String>()})
        }
    }
}

fn to_sql(v: &Value) -> SqlValue {
    match v {
        Value::Null => SqlValue::Null,
        Value::Bool(b) => SqlValue::Integer(*b as i64),
        Value::Number(n) => match n.as_i64() {
            Some(i) => SqlValue::Integer(i),
            None => SqlValue::Real(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => SqlValue::Text(s.clone()),
        Value::Object(m) => match m.get("blob_hex").and_then(Value::as_str) {
            Some(h) => SqlValue::Blob(
                (0..h.len() / 2)
                    .filter_map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).ok())
                    .collect(),
            ),
            None => SqlValue::Text(v.to_string()),
        },
        Value::Array(_) => SqlValue::Text(v.to_string()),
    }
}

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Every extension table with its rows, sorted by every column (independent of insert order).
pub fn dump_extension_tables(db: &Db) -> Result<Vec<TableDump>, ArchiveError> {
    let conn = db.conn();
    let mut stmt = conn.prepare(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
    )?;
    let tables: Vec<(String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let mut out = Vec::new();
    for (name, sql) in tables {
        if CORE_TABLES.contains(&name.as_str()) {
            continue;
        }
        let q = conn.prepare(&format!("SELECT * FROM {}", quote(&name)))?;
        let columns: Vec<String> = q.column_names().iter().map(|c| c.to_string()).collect();
        let order = (1..=columns.len())
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        drop(q);
        let mut q = conn.prepare(&format!("SELECT * FROM {} ORDER BY {order}", quote(&name)))?;
        let n = columns.len();
        let rows = q
            .query_map([], |r| {
                (0..n)
                    .map(|i| r.get_ref(i).map(to_json))
                    .collect::<Result<Vec<_>, _>>()
            })?
            .collect::<Result<Vec<_>, _>>()?;
        out.push(TableDump {
            name,
            sql,
            columns,
            rows,
        });
    }
    Ok(out)
}

/// Create an extension table if missing and add its rows (rows already there are kept).
pub fn import_table(db: &Db, t: &TableDump) -> Result<usize, ArchiveError> {
    let mut conn = db.conn();
    let tx = conn.transaction()?;
    let sql = t.sql.trim();
    let create = match sql.get(..12) {
        Some(head) if head.eq_ignore_ascii_case("CREATE TABLE") => {
            format!("CREATE TABLE IF NOT EXISTS{}", &sql[12..])
        }
        _ => {
            return Err(ArchiveError::Other(format!(
                "table {}: not a CREATE TABLE statement",
                t.name
            )))
        }
    };
    if !sql.to_ascii_uppercase().contains("IF NOT EXISTS") {
        tx.execute_batch(&create)?;
    } else {
        tx.execute_batch(sql)?;
    }
    let cols = t
        .columns
        .iter()
        .map(|c| quote(c))
        .collect::<Vec<_>>()
        .join(", ");
    let marks = (1..=t.columns.len())
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut added = 0;
    {
        let mut stmt = tx.prepare(&format!(
            "INSERT OR IGNORE INTO {} ({cols}) VALUES ({marks})",
            quote(&t.name)
        ))?;
        for row in &t.rows {
            added += stmt.execute(params_from_iter(row.iter().map(to_sql)))?;
        }
    }
    tx.commit()?;
    Ok(added)
}
