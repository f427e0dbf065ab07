//! `jb archive import`: fill a cache from a verified archive — blobs first, then records and
//! samples, then the latest pointers — so that `jb report` reproduces the archived report
//! without running anything. Importing twice changes nothing.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::manifest::{ArchivedRecord, LatestRow, RunRow, TableDump};
use super::tarball::for_each_entry;
use super::{rows, verify, ArchiveError};
use crate::cache::Cache;

#[derive(Debug, Clone, Default, Serialize)]
pub struct ImportSummary {
    pub records: usize,
    pub new_records: usize,
    pub blobs: usize,
    pub latest: usize,
    pub samples: usize,
    pub runs: usize,
    pub table_rows: usize,
}

pub fn import(cache: &Cache, path: &Path) -> Result<ImportSummary, ArchiveError> {
    verify(path)?;
    let mut summary = ImportSummary::default();
    let mut records: Vec<ArchivedRecord> = Vec::new();
    let mut latest: Vec<LatestRow> = Vec::new();
    let mut runs: Vec<RunRow> = Vec::new();
    let mut tables: Vec<TableDump> = Vec::new();
    for_each_entry(path, |name, data| {
        let parse = |e| ArchiveError::json(name, e);
        if name.starts_with("blobs/") {
            cache.cas.put_bytes(&data)?;
            summary.blobs += 1;
        } else if name.starts_with("records/") {
            records.push(serde_json::from_slice(&data).map_err(parse)?);
        } else if name == "latest.json" {
            latest = serde_json::from_slice(&data).map_err(parse)?;
        } else if name == "runs.json" {
            runs = serde_json::from_slice(&data).map_err(parse)?;
        } else if name.starts_with("tables/") {
            tables.push(serde_json::from_slice(&data).map_err(parse)?);
        }
        Ok(())
    })?;
    let runs: BTreeMap<i64, RunRow> = runs.into_iter().map(|r| (r.run_id, r)).collect();
    let mut run_map: BTreeMap<i64, i64> = BTreeMap::new();
    for r in &records {
        if cache.db.get_action(&r.key)?.is_none() {
            summary.new_records += 1;
        }
        rows::insert_action(&cache.db, &r.action())?;
        summary.records += 1;
        if r.samples.is_empty() || rows::has_samples(&cache.db, &r.key)? {
            continue;
        }
        for s in &r.samples {
            if run_map.contains_key(&s.run_id) {
                continue;
            }
            let original = runs.get(&s.run_id).cloned().unwrap_or(RunRow {
                run_id: s.run_id,
                started_at: 0.0,
                finished_at: None,
                command: String::new(),
                status: None,
                fingerprint: None,
            });
            run_map.insert(
                s.run_id,
                rows::insert_run(&cache.db, &original, &original.command)?,
            );
            summary.runs += 1;
        }
        rows::insert_samples(&cache.db, &r.key, &r.samples, &run_map)?;
        summary.samples += r.samples.len();
    }
    for t in &tables {
        summary.table_rows += rows::import_table(&cache.db, t)?;
    }
    for l in &latest {
        cache.db.set_latest(&l.step_id, &l.key, &l.components)?;
        summary.latest += 1;
    }
    // The import itself, as a run of this cache (no samples refer to it).
    let run = cache
        .db
        .start_run(&format!("jb archive import {}", path.display()), "")?;
    cache.db.finish_run(run, "ok")?;
    Ok(summary)
}
