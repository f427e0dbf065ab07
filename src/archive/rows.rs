//! Run-database rows an archive carries beside the action records: samples, runs and extension
//! tables (tables other modules add to `jb.sqlite`, such as per-sample accounting of agent
//! methods), read and written generically.

use std::collections::BTreeMap;

use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};
use serde_json::{json, Value};

use super::manifest::{Column, RunRow, SampleRow, TableDump};
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

/// Store a new record (never replacing one: a key already there is an error).
pub fn insert_action(conn: &Connection, rec: &ActionRecord) -> Result<(), ArchiveError> {
    let j = |v: Result<String, serde_json::Error>| v.map_err(|e| ArchiveError::json(&rec.key, e));
    let result = j(serde_json::to_string(&rec.result))?;
    let files = j(serde_json::to_string(&rec.files))?;
    let components = j(serde_json::to_string(&rec.components))?;
    conn.execute(
        "INSERT INTO actions (key, step_id, kind, status, output_digest, result, files, components, created_at, duration_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
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

/// Point a step at a key unless the cache already has a latest key for it; whether it did.
pub fn insert_latest(
    conn: &Connection,
    step_id: &str,
    key: &str,
    components: &KeyComponents,
) -> Result<bool, ArchiveError> {
    let c = serde_json::to_string(components).map_err(|e| ArchiveError::json(step_id, e))?;
    let n = conn.execute(
        "INSERT INTO latest (step_id, key, components, updated_at) VALUES (?1, ?2, ?3, ?4) ON CONFLICT(step_id) DO NOTHING",
        params![step_id, key, c, crate::cache::db::now()],
    )?;
    Ok(n > 0)
}

/// A run row (as archived) under a fresh id; returns the id.
pub fn insert_run(conn: &Connection, run: &RunRow, command: &str) -> Result<i64, ArchiveError> {
    conn.execute(
        "INSERT INTO runs (started_at, finished_at, command, status, fingerprint) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![run.started_at, run.finished_at, command, run.status, run.fingerprint],
    )?;
    Ok(conn.last_insert_rowid())
}

pub fn insert_samples(
    conn: &Connection,
    key: &str,
    rows: &[SampleRow],
    run_ids: &BTreeMap<i64, i64>,
) -> Result<(), ArchiveError> {
    for s in rows {
        let run_id = run_ids.get(&s.run_id).copied().unwrap_or(s.run_id);
        conn.execute(
            "INSERT INTO samples (key, run_id, idx, device_ms, wall_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![key, run_id, s.idx, s.device_ms, s.wall_ms],
        )?;
    }
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

/// The type an archive gives a declared SQLite column type (its affinity, SQLite's rules).
fn affinity(declared: &str) -> &'static str {
    let d = declared.to_ascii_uppercase();
    if d.contains("INT") {
        "INTEGER"
    } else if d.contains("CHAR") || d.contains("CLOB") || d.contains("TEXT") {
        "TEXT"
    } else if d.contains("BLOB") || d.is_empty() {
        "BLOB"
    } else if d.contains("REAL") || d.contains("FLOA") || d.contains("DOUB") {
        "REAL"
    } else {
        "NUMERIC"
    }
}

/// Columns (name, affinity) and primary-key column names.
type TableShape = (Vec<Column>, Vec<String>);

/// Columns (name, affinity) and primary key of a table, or `None` if it does not exist.
fn table_info(conn: &Connection, name: &str) -> Result<Option<TableShape>, ArchiveError> {
    let mut stmt = conn.prepare(&format!("PRAGMA table_info({})", quote(name)))?;
    let mut cols: Vec<(Column, i64)> = stmt
        .query_map([], |r| {
            Ok((
                Column {
                    name: r.get::<_, String>(1)?,
                    ty: affinity(&r.get::<_, String>(2)?).to_string(),
                },
                r.get::<_, i64>(5)?,
            ))
        })?
        .collect::<Result<_, _>>()?;
    if cols.is_empty() {
        return Ok(None);
    }
    let mut pk: Vec<(i64, String)> = cols
        .iter()
        .filter(|(_, k)| *k > 0)
        .map(|(c, k)| (*k, c.name.clone()))
        .collect();
    pk.sort();
    Ok(Some((
        cols.drain(..).map(|(c, _)| c).collect(),
        pk.into_iter().map(|(_, n)| n).collect(),
    )))
}

/// Every extension table as data (columns, primary key, rows sorted by every column).
pub fn dump_extension_tables(db: &Db) -> Result<Vec<TableDump>, ArchiveError> {
    let conn = db.conn();
    let mut stmt = conn.prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
    )?;
    let tables: Vec<String> = stmt
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let mut out = Vec::new();
    for name in tables {
        if CORE_TABLES.contains(&name.as_str()) {
            continue;
        }
        let Some((columns, primary_key)) = table_info(&conn, &name)? else {
            continue;
        };
        let n = columns.len();
        let order = (1..=n)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let list = columns
            .iter()
            .map(|c| quote(&c.name))
            .collect::<Vec<_>>()
            .join(", ");
        let mut q = conn.prepare(&format!(
            "SELECT {list} FROM {} ORDER BY {order}",
            quote(&name)
        ))?;
        let rows = q
            .query_map([], |r| {
                (0..n)
                    .map(|i| r.get_ref(i).map(to_json))
                    .collect::<Result<Vec<_>, _>>()
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let t = TableDump {
            name,
            columns,
            primary_key,
            rows,
        };
        t.validate().map_err(|m| {
            ArchiveError::Other(format!(
                "extension table cannot be archived: {m} (archives carry plain names and scalar values only)"
            ))
        })?;
        out.push(t);
    }
    Ok(out)
}

/// Create an extension table from its validated column list if missing, and add the rows it
/// does not hold yet; a row whose primary key is taken by a different row is a conflict.
/// Returns (rows added, conflicts).
pub fn import_table(
    conn: &Connection,
    t: &TableDump,
) -> Result<(usize, Vec<String>), ArchiveError> {
    t.validate().map_err(ArchiveError::Other)?;
    let mut conflicts = Vec::new();
    match table_info(conn, &t.name)? {
        None => {
            let mut defs: Vec<String> = t
                .columns
                .iter()
                .map(|c| format!("{} {}", quote(&c.name), c.ty))
                .collect();
            if !t.primary_key.is_empty() {
                defs.push(format!(
                    "PRIMARY KEY ({})",
                    t.primary_key
                        .iter()
                        .map(|k| quote(k))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            conn.execute_batch(&format!(
                "CREATE TABLE {} ({})",
                quote(&t.name),
                defs.join(", ")
            ))?;
        }
        Some((have, _)) => {
            for c in &t.columns {
                match have.iter().find(|h| h.name.eq_ignore_ascii_case(&c.name)) {
                    None => conflicts.push(format!(
                        "table `{}`: the archive's column `{}` is not in the cache's table",
                        t.name, c.name
                    )),
                    Some(h) if h.ty != c.ty => conflicts.push(format!(
                        "table `{}`: column `{}` is {} in the archive, {} in the cache",
                        t.name, c.name, c.ty, h.ty
                    )),
                    _ => {}
                }
            }
            if !conflicts.is_empty() {
                return Ok((0, conflicts));
            }
        }
    }
    let cols = t
        .columns
        .iter()
        .map(|c| quote(&c.name))
        .collect::<Vec<_>>()
        .join(", ");
    let marks = (1..=t.columns.len())
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let same = t
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{} IS ?{}", quote(&c.name), i + 1))
        .collect::<Vec<_>>()
        .join(" AND ");
    let mut exists = conn.prepare(&format!(
        "SELECT COUNT(*) FROM {} WHERE {same}",
        quote(&t.name)
    ))?;
    let mut insert = conn.prepare(&format!(
        "INSERT INTO {} ({cols}) VALUES ({marks})",
        quote(&t.name)
    ))?;
    let mut added = 0;
    for row in &t.rows {
        let values: Vec<SqlValue> = row.iter().map(to_sql).collect();
        let n: i64 = exists.query_row(params_from_iter(values.iter()), |r| r.get(0))?;
        if n > 0 {
            continue;
        }
        match insert.execute(params_from_iter(values.iter())) {
            Ok(k) => added += k,
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                conflicts.push(format!(
                    "table `{}`: the archive's row {} and a different row in the cache have the same primary key ({})",
                    t.name,
                    Value::Array(row.clone()),
                    t.primary_key.join(", ")
                ));
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok((added, conflicts))
}
