//! `jb archive verify`: decode the whole archive and recompute every digest — of every entry,
//! every blob (its name), every record's key and output digest, every source against the key
//! that hashed it — and report each mismatch.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::manifest::{ArchivedRecord, LatestRow, Manifest};
use super::tarball::for_each_entry;
use super::{ArchiveError, FORMAT, MANIFEST};
use crate::key::hash_hex;

#[derive(Debug, Clone, Serialize)]
pub struct Verified {
    pub path: PathBuf,
    pub jb_version: String,
    pub entries: usize,
    pub records: usize,
    pub blobs: usize,
    pub sources: usize,
    pub bytes: u64,
}

pub fn verify(path: &Path) -> Result<Verified, ArchiveError> {
    let mut problems: Vec<String> = Vec::new();
    let mut manifest: Option<Manifest> = None;
    let mut seen: BTreeMap<String, (u64, String)> = BTreeMap::new();
    let mut records: BTreeMap<String, ArchivedRecord> = BTreeMap::new();
    let mut latest: Vec<LatestRow> = Vec::new();
    let mut prev: Option<String> = None;
    let mut total = 0u64;
    for_each_entry(path, |name, data| {
        total += data.len() as u64;
        if prev.as_deref().is_some_and(|p| p >= name) {
            problems.push(format!("{name}: entry out of order or repeated"));
        }
        let first = prev.is_none();
        prev = Some(name.to_string());
        if name == MANIFEST {
            if !first {
                problems.push(format!("{MANIFEST} is not the first entry"));
            }
            match serde_json::from_slice::<Manifest>(&data) {
                Ok(m) => manifest = Some(m),
                Err(e) => problems.push(format!("{MANIFEST}: {e}")),
            }
            return Ok(());
        }
        let digest = hash_hex(&data);
        if let Some(d) = name.strip_prefix("blobs/") {
            if d != digest {
                problems.push(format!("{name}: content hashes to {digest}"));
            }
        } else if let Some(file) = name.strip_prefix("records/") {
            match serde_json::from_slice::<ArchivedRecord>(&data) {
                Ok(r) => {
                    if file.strip_suffix(".json") != Some(r.key.as_str()) {
                        problems.push(format!("{name}: holds the record of key {}", r.key));
                    }
                    records.insert(r.key.clone(), r);
                }
                Err(e) => problems.push(format!("{name}: {e}")),
            }
        } else if name == "latest.json" {
            match serde_json::from_slice::<Vec<LatestRow>>(&data) {
                Ok(l) => latest = l,
                Err(e) => problems.push(format!("{name}: {e}")),
            }
        }
        seen.insert(name.to_string(), (data.len() as u64, digest));
        Ok(())
    })?;
    let Some(m) = manifest else {
        problems.push(format!("no readable {MANIFEST}"));
        return Err(ArchiveError::Invalid {
            path: path.to_path_buf(),
            problems,
        });
    };
    if m.format != FORMAT {
        problems.push(format!("unknown format `{}` (expected {FORMAT})", m.format));
    }

    // Every entry is listed with its size and digest, and nothing else is there.
    let listed: BTreeMap<&str, (u64, &str)> = m
        .entries
        .iter()
        .map(|e| (e.path.as_str(), (e.size, e.blake3.as_str())))
        .collect();
    for (p, (size, digest)) in &listed {
        match seen.get(*p) {
            None => problems.push(format!("{p}: listed in the manifest but missing")),
            Some((s, d)) if s != size || d != digest => problems.push(format!(
                "{p}: changed (manifest: {size} bytes, blake3 {digest}; archive: {s} bytes, blake3 {d})"
            )),
            _ => {}
        }
    }
    for p in seen.keys() {
        if !listed.contains_key(p.as_str()) {
            problems.push(format!("{p}: not in the manifest"));
        }
    }

    // Records: keys and output digests recompute; their blobs are there.
    let blobs: BTreeSet<&str> = seen
        .keys()
        .filter_map(|p| p.strip_prefix("blobs/"))
        .collect();
    let missing: BTreeSet<&str> = m.missing_blobs.iter().map(String::as_str).collect();
    let mut inputs: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for e in &m.records {
        let Some(r) = records.get(&e.key) else {
            problems.push(format!("record {} ({}): missing", e.key, e.step));
            continue;
        };
        if r.step_id != e.step || r.status != e.status || r.output_digest != e.output_digest {
            problems.push(format!("record {}: differs from the manifest", e.key));
        }
        if e.recomputable && r.components.key() != r.key {
            problems.push(format!(
                "record {} ({}): its components hash to key {}",
                e.key,
                e.step,
                r.components.key()
            ));
        }
        if e.recomputable && crate::key::output_digest(&r.result, &r.files) != r.output_digest {
            problems.push(format!(
                "record {} ({}): its result no longer hashes to its output digest",
                e.key, e.step
            ));
        }
        for (name, d) in &r.files {
            if !blobs.contains(d.as_str()) && !missing.contains(d.as_str()) {
                problems.push(format!(
                    "record {}: file {name} (blob {d}) is missing",
                    e.key
                ));
            }
        }
        for (name, h) in &r.components.0 {
            if let Some(p) = name.strip_prefix("input:") {
                inputs.entry(p).or_default().insert(h.as_str());
            }
        }
    }
    if records.len() != m.records.len() {
        problems.push(format!(
            "{} records in the archive, {} in the manifest",
            records.len(),
            m.records.len()
        ));
    }
    for l in &latest {
        if !records.contains_key(&l.key) {
            problems.push(format!("latest {}: record {} is missing", l.step_id, l.key));
        }
    }

    // Sources are the content the keys hashed.
    for s in &m.sources {
        match seen.get(&s.entry) {
            Some((_, d)) if *d == s.blake3 => {}
            _ => problems.push(format!("{}: does not match the manifest", s.entry)),
        }
        if !inputs
            .get(s.path.as_str())
            .is_some_and(|hs| hs.contains(s.blake3.as_str()))
        {
            problems.push(format!(
                "{}: no record's key hashed this content of {}",
                s.entry, s.path
            ));
        }
    }

    if !problems.is_empty() {
        return Err(ArchiveError::Invalid {
            path: path.to_path_buf(),
            problems,
        });
    }
    Ok(Verified {
        path: path.to_path_buf(),
        jb_version: m.jb_version,
        entries: seen.len() + 1,
        records: records.len(),
        blobs: blobs.len(),
        sources: m.sources.len(),
        bytes: total,
    })
}
