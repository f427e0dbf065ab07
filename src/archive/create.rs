//! `jb archive create`: the results of a cache, with what they were computed from, as one
//! deterministic file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use super::manifest::{
    ArchivedRecord, Entry, LatestRow, Manifest, RecordEntry, RunRow, SourceEntry,
};
use std::io::Read;

use super::sign::{self, SecretKey};
use super::tarball::{hash_file, Hashing, Writer, DEFAULT_LEVEL};
use super::{rows, ArchiveError, FORMAT, MANIFEST, SIGNATURE};
use crate::cache::Cache;
use crate::key::hash_hex;
use crate::project::Project;

#[derive(Debug, Clone)]
pub struct CreateOptions {
    /// Every action record, not only the latest of every step.
    pub all: bool,
    /// zstd level.
    pub level: i32,
}

impl Default for CreateOptions {
    fn default() -> Self {
        CreateOptions {
            all: false,
            level: DEFAULT_LEVEL,
        }
    }
}

/// Sign the manifest with this key (`MANIFEST.sig`).
pub type SignWith<'a> = Option<&'a SecretKey>;

#[derive(Debug, Clone, Serialize)]
pub struct CreateSummary {
    pub path: PathBuf,
    pub bytes: u64,
    pub uncompressed_bytes: u64,
    pub records: usize,
    pub blobs: usize,
    pub blob_bytes: u64,
    pub sources: usize,
    pub pipelines: usize,
    pub tables: usize,
    pub missing_blobs: Vec<String>,
    pub stale_sources: Vec<String>,
    /// The signer's key fingerprint, when signed.
    pub signed_by: Option<String>,
}

enum Content {
    Bytes(Vec<u8>),
    /// A file (CAS blob or source) with its digest and size, streamed (and checked again) when
    /// written.
    File {
        path: PathBuf,
        blake3: String,
        size: u64,
    },
}

fn json_bytes<T: Serialize>(entry: &str, v: &T) -> Result<Vec<u8>, ArchiveError> {
    let mut out = serde_json::to_vec_pretty(v).map_err(|e| ArchiveError::json(entry, e))?;
    out.push(b'\n');
    Ok(out)
}

/// Where an input file named by a key goes in the archive, if it may go at all.
fn source_entry(path: &str) -> Option<String> {
    let p = Path::new(path);
    let mut parts = Vec::new();
    for c in p.components() {
        match c {
            Component::Normal(s) => parts.push(s.to_string_lossy().to_string()),
            Component::RootDir | Component::Prefix(_) => {}
            Component::CurDir => {}
            Component::ParentDir => return None,
        }
    }
    if parts.is_empty() {
        return None;
    }
    let rel = parts.join("/");
    Some(if p.is_absolute() {
        format!("sources/_abs/{rel}")
    } else {
        format!("sources/{rel}")
    })
}

pub fn create(
    cache: &Cache,
    project: &Project,
    out: &Path,
    opts: &CreateOptions,
    sign_with: SignWith<'_>,
) -> Result<CreateSummary, ArchiveError> {
    let mut entries: BTreeMap<String, Content> = BTreeMap::new();

    // Records: the latest of every step (or every one), with their samples.
    let latest = rows::latest(&cache.db)?;
    let mut keys: BTreeSet<String> = latest.iter().map(|(_, k, _)| k.clone()).collect();
    if opts.all {
        keys.extend(cache.db.all_actions()?.into_iter().map(|(k, _, _)| k));
    }
    let mut records = Vec::new();
    for key in &keys {
        if let Some(rec) = cache.db.get_action(key)? {
            let samples = rows::samples(&cache.db, key)?;
            records.push(ArchivedRecord::new(rec, samples));
        }
    }
    let have: BTreeSet<&str> = records.iter().map(|r| r.key.as_str()).collect();
    let latest_rows: Vec<LatestRow> = latest
        .iter()
        .filter(|(_, k, _)| have.contains(k.as_str()))
        .map(|(s, k, c)| LatestRow {
            step_id: s.clone(),
            key: k.clone(),
            components: c.clone(),
        })
        .collect();
    entries.insert(
        "latest.json".into(),
        Content::Bytes(json_bytes("latest.json", &latest_rows)?),
    );

    // Runs those samples were measured in, numbered 1.. in start order (ids of the cache are
    // local to it: an imported cache gives the same archive).
    let run_ids: BTreeSet<i64> = records
        .iter()
        .flat_map(|r| r.samples.iter().map(|s| s.run_id))
        .collect();
    let mut runs: Vec<RunRow> = Vec::new();
    for id in run_ids {
        runs.push(rows::run(&cache.db, id)?.unwrap_or(RunRow {
            run_id: id,
            started_at: 0.0,
            finished_at: None,
            command: String::new(),
            status: None,
            fingerprint: None,
        }));
    }
    runs.sort_by(|a, b| {
        a.started_at
            .total_cmp(&b.started_at)
            .then_with(|| a.command.cmp(&b.command))
            .then(a.run_id.cmp(&b.run_id))
    });
    let renumber: BTreeMap<i64, i64> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| (r.run_id, i as i64 + 1))
        .collect();
    for r in runs.iter_mut() {
        r.run_id = renumber[&r.run_id];
    }
    for rec in records.iter_mut() {
        for s in rec.samples.iter_mut() {
            s.run_id = renumber[&s.run_id];
        }
    }
    entries.insert(
        "runs.json".into(),
        Content::Bytes(json_bytes("runs.json", &runs)?),
    );

    // Blobs the records name.
    let mut missing_blobs = BTreeSet::new();
    let mut blob_sizes: BTreeMap<String, u64> = BTreeMap::new();
    for r in &records {
        for d in r.files.values() {
            if blob_sizes.contains_key(d) || missing_blobs.contains(d) {
                continue;
            }
            match hash_file(&cache.cas.path_of(d)) {
                Ok((digest, size)) if digest == *d => {
                    blob_sizes.insert(d.clone(), size);
                }
                _ => {
                    missing_blobs.insert(d.clone());
                }
            }
        }
    }
    for (d, size) in &blob_sizes {
        entries.insert(
            format!("blobs/{d}"),
            Content::File {
                path: cache.cas.path_of(d),
                blake3: d.clone(),
                size: *size,
            },
        );
    }

    // Input files, as the keys hashed them.
    let mut sources = Vec::new();
    let mut stale = BTreeSet::new();
    let mut named: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in &records {
        for (name, hash) in &r.components.0 {
            if let Some(path) = name.strip_prefix("input:") {
                named
                    .entry(path.to_string())
                    .or_default()
                    .insert(hash.clone());
            }
        }
    }
    for (path, hashes) in &named {
        let Some(entry) = source_entry(path) else {
            stale.insert(path.clone());
            continue;
        };
        let full = if Path::new(path).is_absolute() {
            PathBuf::from(path)
        } else {
            project.root.join(path)
        };
        match hash_file(&full) {
            Ok((digest, size)) if hashes.contains(&digest) => {
                for h in hashes.iter().filter(|h| **h != digest) {
                    stale.insert(format!("{path}@{}", &h[..12.min(h.len())]));
                }
                sources.push(SourceEntry {
                    entry: entry.clone(),
                    path: path.clone(),
                    blake3: digest.clone(),
                });
                entries.insert(
                    entry,
                    Content::File {
                        path: full.clone(),
                        blake3: digest,
                        size,
                    },
                );
            }
            _ => {
                for h in hashes {
                    stale.insert(format!("{path}@{}", &h[..12.min(h.len())]));
                }
            }
        }
    }

    // Pipelines.
    let mut pipelines = Vec::new();
    let dir = project.pipelines_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| ArchiveError::io(&dir, e))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    for f in files {
        let name = format!(
            "pipelines/{}",
            f.file_name().unwrap_or_default().to_string_lossy()
        );
        let data = std::fs::read(&f).map_err(|e| ArchiveError::io(&f, e))?;
        pipelines.push(name.clone());
        entries.insert(name, Content::Bytes(data));
    }

    // Extension tables.
    let mut tables = Vec::new();
    for t in rows::dump_extension_tables(&cache.db)? {
        let name = format!("tables/{}.json", t.name);
        tables.push(t.name.clone());
        entries.insert(name.clone(), Content::Bytes(json_bytes(&name, &t)?));
    }

    // Records last, so the manifest can list them.
    let mut environments: BTreeSet<BTreeMap<String, String>> = BTreeSet::new();
    let mut record_entries = Vec::new();
    for r in &records {
        let env: BTreeMap<String, String> = r
            .components
            .0
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("env:")?.to_string(), v.clone())))
            .collect();
        if !env.is_empty() {
            environments.insert(env);
        }
        record_entries.push(RecordEntry {
            step: r.step_id.clone(),
            key: r.key.clone(),
            kind: r.kind.clone(),
            status: r.status.clone(),
            output_digest: r.output_digest.clone(),
            measurements: r.measurements_digest(),
        });
        let name = format!("records/{}.json", r.key);
        entries.insert(name.clone(), Content::Bytes(json_bytes(&name, r)?));
    }
    record_entries.sort_by(|a, b| a.step.cmp(&b.step).then(a.key.cmp(&b.key)));

    let manifest_entries = entries
        .iter()
        .map(|(path, c)| match c {
            Content::Bytes(b) => Entry {
                path: path.clone(),
                size: b.len() as u64,
                blake3: hash_hex(b),
            },
            Content::File { blake3, size, .. } => Entry {
                path: path.clone(),
                size: *size,
                blake3: blake3.clone(),
            },
        })
        .collect();
    let manifest = Manifest {
        format: FORMAT.into(),
        jb_version: env!("CARGO_PKG_VERSION").into(),
        environments: environments.into_iter().collect(),
        pipelines: pipelines.clone(),
        records: record_entries,
        missing_blobs: missing_blobs.iter().cloned().collect(),
        sources: sources.clone(),
        stale_sources: stale.iter().cloned().collect(),
        tables: tables.clone(),
        entries: manifest_entries,
    };
    let manifest_bytes = json_bytes(MANIFEST, &manifest)?;

    // Write next to the target and rename into place.
    let dir = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| ArchiveError::io(dir, e))?;
    let tmp = tempfile::Builder::new()
        .prefix(".jb-archive-")
        .tempfile_in(dir)
        .map_err(|e| ArchiveError::io(dir, e))?
        .into_temp_path();
    let mut uncompressed = manifest_bytes.len() as u64;
    let mut w = Writer::create(&tmp, opts.level)?;
    w.add(MANIFEST, &manifest_bytes)?;
    let signature = sign_with.map(|k| sign::sign(&manifest_bytes, k));
    if let Some(sig) = &signature {
        let bytes = json_bytes(SIGNATURE, sig)?;
        uncompressed += bytes.len() as u64;
        w.add(SIGNATURE, &bytes)?;
    }
    for (name, c) in &entries {
        match c {
            Content::Bytes(b) => {
                uncompressed += b.len() as u64;
                w.add(name, b)?;
            }
            Content::File { path, blake3, size } => {
                let f = std::fs::File::open(path).map_err(|e| ArchiveError::io(path, e))?;
                let mut r = Hashing::new(f.take(*size));
                w.add_reader(name, *size, &mut r)?;
                if r.bytes != *size || r.digest() != *blake3 {
                    return Err(ArchiveError::Other(format!(
                        "{} changed while archiving (entry {name})",
                        path.display()
                    )));
                }
                uncompressed += size;
            }
        }
    }
    w.finish()?;
    tmp.persist(out)
        .map_err(|e| ArchiveError::io(out, e.error))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(out, std::fs::Permissions::from_mode(0o644));
    }
    let bytes = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    Ok(CreateSummary {
        path: out.to_path_buf(),
        bytes,
        uncompressed_bytes: uncompressed,
        records: records.len(),
        blobs: blob_sizes.len(),
        blob_bytes: blob_sizes.values().sum(),
        sources: sources.len(),
        pipelines: pipelines.len(),
        tables: tables.len(),
        missing_blobs: missing_blobs.into_iter().collect(),
        stale_sources: stale.into_iter().collect(),
        signed_by: signature.map(|s| s.fingerprint),
    })
}
