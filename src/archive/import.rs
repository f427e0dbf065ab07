//! `jb archive import`: fill a cache from a verified archive, so that `jb report` reproduces the
//! archived report without running anything.
//!
//! Import adds, it never overwrites: a record whose key the cache already holds with different
//! content (result, timings, samples, files) is a conflict naming both, and so is an extension
//! table row whose primary key the cache holds with other values. Conflicts are found before
//! anything is written, and the database rows go in as one transaction, so a conflicting or
//! failing import leaves the cache as it was. A step the cache already has a latest result for
//! keeps it. Importing twice changes nothing.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde::Serialize;

use super::entry::Kind;
use super::manifest::{ArchivedRecord, RunRow, SampleRow};
use super::sign::PublicKey;
use super::tarball::for_each_entry;
use super::verify::{verify_contents, SignedBy, VerifyOptions};
use super::{rows, ArchiveError};
use crate::cache::Cache;

#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// Import only an archive signed by one of these keys.
    pub require_key: Vec<PublicKey>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ImportSummary {
    pub records: usize,
    pub new_records: usize,
    pub blobs: usize,
    pub latest: usize,
    /// Steps whose latest result in the cache was kept (the archive's differs).
    pub latest_kept: usize,
    pub samples: usize,
    pub runs: usize,
    pub table_rows: usize,
    pub signature: Option<SignedBy>,
}

/// The ways a record in the cache differs from the archive's one of the same key.
fn differences(
    have: &crate::cache::ActionRecord,
    samples: &[SampleRow],
    r: &ArchivedRecord,
) -> Vec<String> {
    let mut d = Vec::new();
    if have.step_id != r.step_id {
        d.push(format!("step {} vs {}", r.step_id, have.step_id));
    }
    if have.status != r.status {
        d.push(format!("status {} vs {}", r.status, have.status));
    }
    if have.output_digest != r.output_digest {
        d.push(format!(
            "output digest {} vs {}",
            &r.output_digest[..12.min(r.output_digest.len())],
            &have.output_digest[..12.min(have.output_digest.len())]
        ));
    }
    if have.result != r.result {
        let median = |v: &serde_json::Value| v.get("median_ms").cloned().unwrap_or_default();
        if median(&have.result) != median(&r.result) {
            d.push(format!(
                "median_ms {} vs {}",
                median(&r.result),
                median(&have.result)
            ));
        } else {
            d.push("result".into());
        }
    }
    if have.files != r.files {
        d.push("files".into());
    }
    let values = |s: &[SampleRow]| -> Vec<(i64, Option<f64>, Option<f64>)> {
        s.iter().map(|x| (x.idx, x.device_ms, x.wall_ms)).collect()
    };
    if !samples.is_empty() && values(samples) != values(&r.samples) {
        d.push(format!(
            "samples ({} vs {})",
            r.samples.len(),
            samples.len()
        ));
    }
    d
}

pub fn import(
    cache: &Cache,
    path: &Path,
    opts: &ImportOptions,
) -> Result<ImportSummary, ArchiveError> {
    let (verified, contents) = verify_contents(
        path,
        &VerifyOptions {
            trusted: opts.require_key.clone(),
        },
    )?;
    let mut summary = ImportSummary {
        signature: verified.signature,
        ..Default::default()
    };

    // 1. What is new, and what would overwrite the cache (read only).
    let mut conflicts = Vec::new();
    let mut new_records: Vec<&ArchivedRecord> = Vec::new();
    for r in contents.records.values() {
        match cache.db.get_action(&r.key)? {
            None => new_records.push(r),
            Some(have) => {
                let samples = rows::samples(&cache.db, &r.key)?;
                let d = differences(&have, &samples, r);
                if !d.is_empty() {
                    conflicts.push(format!(
                        "record {} ({}): the archive's differs from the cache's ({}; archive vs cache)",
                        r.key,
                        r.step_id,
                        d.join(", ")
                    ));
                }
            }
        }
    }
    if !conflicts.is_empty() {
        return Err(ArchiveError::Conflict {
            path: path.to_path_buf(),
            cache: cache.dir.clone(),
            problems: conflicts,
        });
    }

    // 2. Blobs, streamed into the CAS (content-addressed: a blob is stored only under the digest
    //    its content hashes to, so nothing in the cache changes meaning).
    let tmp_dir = cache.dir.join("tmp");
    std::fs::create_dir_all(&tmp_dir).map_err(|e| ArchiveError::io(&tmp_dir, e))?;
    for_each_entry(path, |e| {
        if e.kind != Kind::Blob {
            return Ok(());
        }
        let digest = e.name.strip_prefix("blobs/").unwrap_or("").to_string();
        if super::tarball::hash_file(&cache.cas.path_of(&digest)).is_ok_and(|(d, _)| d == digest) {
            summary.blobs += 1;
            return Ok(());
        }
        let mut tmp = tempfile::NamedTempFile::new_in(&tmp_dir)
            .map_err(|err| ArchiveError::Other(format!("{}: {err}", tmp_dir.display())))?;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = e
                .data
                .read(&mut buf)
                .map_err(|err| ArchiveError::io(e.name, err))?;
            if n == 0 {
                break;
            }
            tmp.write_all(&buf[..n])
                .map_err(|err| ArchiveError::Other(format!("{}: {err}", tmp.path().display())))?;
        }
        let stored = cache.cas.put_file(tmp.path())?;
        if stored != digest {
            return Err(ArchiveError::Unreadable {
                path: path.to_path_buf(),
                message: format!("{}: changed since it was verified", e.name),
            });
        }
        summary.blobs += 1;
        Ok(())
    })?;

    // 3. Rows, in one transaction.
    let runs: BTreeMap<i64, RunRow> = contents
        .runs
        .iter()
        .map(|r| (r.run_id, r.clone()))
        .collect();
    let mut conn = cache.db.conn();
    let tx = conn.transaction()?;
    let mut run_map: BTreeMap<i64, i64> = BTreeMap::new();
    summary.records = contents.records.len();
    for r in &new_records {
        rows::insert_action(&tx, &r.action())?;
        summary.new_records += 1;
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
                rows::insert_run(&tx, &original, &original.command)?,
            );
            summary.runs += 1;
        }
        rows::insert_samples(&tx, &r.key, &r.samples, &run_map)?;
        summary.samples += r.samples.len();
    }
    for t in &contents.tables {
        let (added, c) = rows::import_table(&tx, t)?;
        summary.table_rows += added;
        conflicts.extend(c);
    }
    if !conflicts.is_empty() {
        drop(tx); // rolls back
        return Err(ArchiveError::Conflict {
            path: path.to_path_buf(),
            cache: cache.dir.clone(),
            problems: conflicts,
        });
    }
    for l in &contents.latest {
        if rows::insert_latest(&tx, &l.step_id, &l.key, &l.components)? {
            summary.latest += 1;
        } else {
            let have: String = tx.query_row(
                "SELECT key FROM latest WHERE step_id = ?1",
                [&l.step_id],
                |row| row.get(0),
            )?;
            if have != l.key {
                summary.latest_kept += 1;
            }
        }
    }
    // The import itself, as a run of this cache (no samples refer to it).
    let now = crate::cache::db::now();
    tx.execute(
        "INSERT INTO runs (started_at, finished_at, command, status, fingerprint) VALUES (?1, ?1, ?2, 'ok', '')",
        rusqlite::params![now, format!("jb archive import {}", path.display())],
    )?;
    tx.commit()?;
    Ok(summary)
}
