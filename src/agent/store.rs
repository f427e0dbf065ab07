//! The agent tables of the run database (`jb.sqlite`): one row per `jb agent` invocation in
//! `agent_runs` (method, parameters, request counts, the summary as JSON) and one row per sample
//! in `agent_samples` (outcome, speedup, best so far, the translate step's key). Reports read
//! them with [`Store::runs`] and [`Store::samples`].

use std::path::Path;
use std::sync::Mutex;

use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{JbError, Result};

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS agent_runs (
    run_id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    method TEXT NOT NULL,
    agent TEXT NOT NULL,
    params TEXT NOT NULL,
    workloads TEXT NOT NULL,
    started_at REAL NOT NULL,
    finished_at REAL,
    status TEXT NOT NULL,
    requests INTEGER NOT NULL DEFAULT 0,
    cached_responses INTEGER NOT NULL DEFAULT 0,
    summary TEXT,
    benchmarks TEXT
);
CREATE INDEX IF NOT EXISTS agent_runs_method ON agent_runs(method, name);
CREATE TABLE IF NOT EXISTS agent_samples (
    run_id INTEGER NOT NULL,
    workload TEXT NOT NULL,
    number INTEGER NOT NULL,
    tag TEXT NOT NULL,
    chain INTEGER,
    step INTEGER NOT NULL,
    phase TEXT NOT NULL,
    parent INTEGER,
    outcome TEXT NOT NULL,
    eval_status TEXT,
    speedup REAL,
    best_so_far REAL,
    kernel_ms REAL,
    xla_ms REAL,
    translate_key TEXT,
    response_cached INTEGER NOT NULL,
    candidate TEXT,
    PRIMARY KEY (run_id, workload, number)
);
"#;

/// One sample as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleRow {
    pub workload: String,
    /// 0-based position within the workload, in the method's order.
    pub number: usize,
    pub tag: String,
    pub chain: Option<usize>,
    /// Turn (iterative) or iteration (beam); 0 for best-of-N.
    pub step: usize,
    pub phase: String,
    /// The sample whose kernel this one refined.
    pub parent: Option<usize>,
    pub outcome: String,
    pub eval_status: Option<String>,
    pub speedup: Option<f64>,
    pub best_so_far: Option<f64>,
    pub kernel_ms: Option<f64>,
    pub xla_ms: Option<f64>,
    pub translate_key: Option<String>,
    pub response_cached: bool,
    /// Content digest (blake3) of the candidate's code.
    pub candidate: Option<String>,
}

/// A run as started.
#[derive(Debug, Clone)]
pub struct RunInfo {
    pub name: String,
    pub method: String,
    pub agent: Value,
    pub params: Value,
    pub workloads: Vec<String>,
}

pub struct Store {
    conn: Mutex<Connection>,
}

fn json_err(e: serde_json::Error) -> JbError {
    JbError::Cache(format!("bad JSON in the agent tables: {e}"))
}

impl Store {
    pub fn open(cache_dir: &Path) -> Result<Store> {
        std::fs::create_dir_all(cache_dir).map_err(|e| JbError::io(cache_dir, e))?;
        let conn = crate::cache::db::open_shared(&cache_dir.join("jb.sqlite"), Some(SCHEMA))?;
        Ok(Store {
            conn: Mutex::new(conn),
        })
    }

    /// The agent tables of a cache that has them, for readers (`jb report`): `None` when no
    /// study ever ran there. Unlike [`Store::open`] it creates nothing, so reading a cache
    /// (and archiving it again) does not change it.
    pub fn open_existing(cache_dir: &Path) -> Result<Option<Store>> {
        let path = cache_dir.join("jb.sqlite");
        if !path.exists() {
            return Ok(None);
        }
        let conn = crate::cache::db::open_shared(&path, None)?;
        let has: bool = conn.query_row(
            "SELECT EXISTS(SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'agent_samples')",
            [],
            |r| r.get(0),
        )?;
        Ok(has.then(|| Store {
            conn: Mutex::new(conn),
        }))
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn start_run(&self, info: &RunInfo) -> Result<i64> {
        let conn = self.conn();
        conn.execute(
            "INSERT INTO agent_runs (name, method, agent, params, workloads, started_at, status) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'running')",
            params![
                info.name,
                info.method,
                info.agent.to_string(),
                info.params.to_string(),
                serde_json::to_string(&info.workloads).map_err(json_err)?,
                crate::cache::db::now()
            ],
        )?;
        Ok(conn.last_insert_rowid())
    }

    pub fn add_samples(&self, run_id: i64, rows: &[SampleRow]) -> Result<()> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        for r in rows {
            tx.execute(
                "INSERT OR REPLACE INTO agent_samples (run_id, workload, number, tag, chain, step, phase, parent, outcome, eval_status, speedup, best_so_far, kernel_ms, xla_ms, translate_key, response_cached, candidate) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
                params![
                    run_id,
                    r.workload,
                    r.number as i64,
                    r.tag,
                    r.chain.map(|c| c as i64),
                    r.step as i64,
                    r.phase,
                    r.parent.map(|p| p as i64),
                    r.outcome,
                    r.eval_status,
                    r.speedup,
                    r.best_so_far,
                    r.kernel_ms,
                    r.xla_ms,
                    r.translate_key,
                    r.response_cached as i64,
                    r.candidate
                ],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    pub fn finish_run(
        &self,
        run_id: i64,
        status: &str,
        requests: u64,
        cached_responses: u64,
        summary: &Value,
        benchmarks: &Value,
    ) -> Result<()> {
        self.conn().execute(
            "UPDATE agent_runs SET finished_at = ?1, status = ?2, requests = ?3, cached_responses = ?4, summary = ?5, benchmarks = ?6 WHERE run_id = ?7",
            params![
                crate::cache::db::now(),
                status,
                requests as i64,
                cached_responses as i64,
                summary.to_string(),
                benchmarks.to_string(),
                run_id
            ],
        )?;
        Ok(())
    }

    /// Every run, newest first, as JSON objects (parameters, summary and benchmarks parsed).
    pub fn runs(&self) -> Result<Vec<Value>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT run_id, name, method, agent, params, workloads, started_at, finished_at, status, requests, cached_responses, summary, benchmarks FROM agent_runs ORDER BY run_id DESC",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, f64>(6)?,
                r.get::<_, Option<f64>>(7)?,
                r.get::<_, String>(8)?,
                r.get::<_, i64>(9)?,
                r.get::<_, i64>(10)?,
                r.get::<_, Option<String>>(11)?,
                r.get::<_, Option<String>>(12)?,
            ))
        })?;
        let parse = |s: &str| serde_json::from_str::<Value>(s).map_err(json_err);
        let mut out = Vec::new();
        for row in rows {
            let (
                id,
                name,
                method,
                agent,
                params,
                wls,
                started,
                finished,
                status,
                req,
                cached,
                summary,
                benches,
            ) = row?;
            out.push(serde_json::json!({
                "run_id": id,
                "name": name,
                "method": method,
                "agent": parse(&agent)?,
                "params": parse(&params)?,
                "workloads": parse(&wls)?,
                "started_at": started,
                "finished_at": finished,
                "status": status,
                "requests": req,
                "cached_responses": cached,
                "summary": summary.as_deref().map(parse).transpose()?,
                "benchmarks": benches.as_deref().map(parse).transpose()?,
            }));
        }
        Ok(out)
    }

    /// The samples of a run, by workload and number.
    pub fn samples(&self, run_id: i64) -> Result<Vec<SampleRow>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT workload, number, tag, chain, step, phase, parent, outcome, eval_status, speedup, best_so_far, kernel_ms, xla_ms, translate_key, response_cached, candidate FROM agent_samples WHERE run_id = ?1 ORDER BY workload, number",
        )?;
        let rows = stmt.query_map(params![run_id], |r| {
            Ok(SampleRow {
                workload: r.get(0)?,
                number: r.get::<_, i64>(1)? as usize,
                tag: r.get(2)?,
                chain: r.get::<_, Option<i64>>(3)?.map(|c| c as usize),
                step: r.get::<_, i64>(4)? as usize,
                phase: r.get(5)?,
                parent: r.get::<_, Option<i64>>(6)?.map(|p| p as usize),
                outcome: r.get(7)?,
                eval_status: r.get(8)?,
                speedup: r.get(9)?,
                best_so_far: r.get(10)?,
                kernel_ms: r.get(11)?,
                xla_ms: r.get(12)?,
                translate_key: r.get(13)?,
                response_cached: r.get::<_, i64>(14)? != 0,
                candidate: r.get(15)?,
            })
        })?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    /// The status of a run.
    pub fn status(&self, run_id: i64) -> Result<Option<String>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT status FROM agent_runs WHERE run_id = ?1",
                params![run_id],
                |r| r.get(0),
            )
            .optional()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn runs_and_samples_round_trip() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(d.path()).unwrap();
        let id = s
            .start_run(&RunInfo {
                name: "best-of-n-x".into(),
                method: "best-of-n".into(),
                agent: json!({"kind": "openai", "model": "m"}),
                params: json!({"samples": 2}),
                workloads: vec!["12p_RMSNorm".into()],
            })
            .unwrap();
        assert_eq!(s.status(id).unwrap().as_deref(), Some("running"));
        let row = SampleRow {
            workload: "12p_RMSNorm".into(),
            number: 0,
            tag: "0".into(),
            chain: None,
            step: 0,
            phase: "translate".into(),
            parent: None,
            outcome: "correct_faster".into(),
            eval_status: Some("correct".into()),
            speedup: Some(1.5),
            best_so_far: Some(1.5),
            kernel_ms: Some(1.0),
            xla_ms: Some(1.5),
            translate_key: Some("k".into()),
            response_cached: false,
            candidate: Some("d".into()),
        };
        s.add_samples(id, std::slice::from_ref(&row)).unwrap();
        s.finish_run(id, "ok", 2, 0, &json!({"geomean_speedup": 1.5}), &json!([]))
            .unwrap();
        let runs = s.runs().unwrap();
        assert_eq!(runs[0]["status"], "ok");
        assert_eq!(runs[0]["requests"], 2);
        assert_eq!(runs[0]["summary"]["geomean_speedup"], 1.5);
        assert_eq!(s.samples(id).unwrap(), vec![row]);
    }
}
