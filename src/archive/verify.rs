//! `jb archive verify`: decode the whole archive and recompute every digest — of every entry,
//! every blob (its name), every record's key, output digest and measurement digest, every source
//! against the key that hashed it — check that each record's timings agree with its samples,
//! check the signature if there is one, and report each mismatch.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::entry::Kind;
use super::manifest::{ArchivedRecord, LatestRow, Manifest, RunRow, TableDump};
use super::sign::{self, PublicKey, SignatureEntry};
use super::tarball::for_each_entry;
use super::{ArchiveError, FORMAT, MANIFEST, SIGNATURE};

#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// Keys the caller trusts: when any is given, the archive must be signed by one of them.
    pub trusted: Vec<PublicKey>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SignedBy {
    pub fingerprint: String,
    pub comment: String,
    /// Whether the signer is one of the keys the caller trusts.
    pub trusted: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Verified {
    pub path: PathBuf,
    pub jb_version: String,
    pub entries: usize,
    pub records: usize,
    pub blobs: usize,
    pub sources: usize,
    pub bytes: u64,
    /// The signer, when the archive is signed (the signature checked).
    pub signature: Option<SignedBy>,
}

/// What import needs of a verified archive (everything but blobs, which are streamed again).
#[derive(Debug, Default)]
pub(crate) struct Contents {
    pub records: BTreeMap<String, ArchivedRecord>,
    pub latest: Vec<LatestRow>,
    pub runs: Vec<RunRow>,
    pub tables: Vec<TableDump>,
    pub blobs: BTreeSet<String>,
}

pub fn verify(path: &Path, opts: &VerifyOptions) -> Result<Verified, ArchiveError> {
    verify_contents(path, opts).map(|(v, _)| v)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-300)
}

fn numbers(v: Option<&Value>) -> Option<Vec<f64>> {
    v?.as_array()?.iter().map(Value::as_f64).collect()
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// Timings that do not follow from the record's samples.
fn measurement_problems(r: &ArchivedRecord, runs: &BTreeSet<i64>) -> Vec<String> {
    let mut out = Vec::new();
    let who = format!("record {} ({})", r.key, r.step_id);
    for (field, samples_field) in [
        ("median_ms", "samples_ms"),
        ("wall_median_ms", "wall_samples_ms"),
    ] {
        let Some(samples) = numbers(r.result.get(samples_field)).filter(|s| !s.is_empty()) else {
            continue;
        };
        let mut sorted = samples.clone();
        sorted.sort_by(f64::total_cmp);
        if let Some(m) = r.result.get(field).and_then(Value::as_f64) {
            if !close(m, median(&sorted)) {
                out.push(format!(
                    "{who}: {field} {m} is not the median of its {samples_field} ({})",
                    median(&sorted)
                ));
            }
        }
        if field == "median_ms" {
            if let Some(m) = r.result.get("min_ms").and_then(Value::as_f64) {
                if !close(m, sorted[0]) {
                    out.push(format!(
                        "{who}: min_ms {m} is not the minimum of its samples_ms ({})",
                        sorted[0]
                    ));
                }
            }
        }
    }
    for s in &r.samples {
        if !runs.contains(&s.run_id) {
            out.push(format!(
                "{who}: a sample names run {}, which runs.json does not hold",
                s.run_id
            ));
            break;
        }
    }
    let device: Vec<f64> = r.samples.iter().filter_map(|s| s.device_ms).collect();
    if device.is_empty() {
        return out;
    }
    if let Some(samples) = numbers(r.result.get("samples_ms")).filter(|s| !s.is_empty()) {
        let mut by_run: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
        for s in &r.samples {
            if let Some(d) = s.device_ms {
                by_run.entry(s.run_id).or_default().push(d);
            }
        }
        if !by_run.values().any(|v| *v == samples) {
            out.push(format!(
                "{who}: no run's samples are the samples_ms of its result"
            ));
        }
    }
    if let Some(p) = r.result.get("pooled_median_ms").and_then(Value::as_f64) {
        let mut v = device.clone();
        v.sort_by(f64::total_cmp);
        if !close(p, v[v.len() / 2])
            || r.result.get("pooled_samples").and_then(Value::as_u64) != Some(v.len() as u64)
        {
            out.push(format!(
                "{who}: pooled_median_ms/pooled_samples do not follow from its {} samples",
                v.len()
            ));
        }
    }
    out
}

pub(crate) fn verify_contents(
    path: &Path,
    opts: &VerifyOptions,
) -> Result<(Verified, Contents), ArchiveError> {
    let mut problems: Vec<String> = Vec::new();
    let mut manifest: Option<(Manifest, Vec<u8>)> = None;
    let mut signature: Option<SignatureEntry> = None;
    let mut seen: BTreeMap<String, (u64, String)> = BTreeMap::new();
    let mut c = Contents::default();
    let mut prev: Option<String> = None;
    let mut total = 0u64;
    for_each_entry(path, |mut e| {
        let name = e.name.to_string();
        total += e.size;
        if prev.as_deref().is_some_and(|p| p >= name.as_str()) {
            problems.push(format!("{name}: entry out of order or repeated"));
        }
        let first = prev.is_none();
        prev = Some(name.clone());
        let parse = |data: &[u8], problems: &mut Vec<String>| -> Option<Value> {
            match serde_json::from_slice::<Value>(data) {
                Ok(v) => Some(v),
                Err(err) => {
                    problems.push(format!("{name}: {err}"));
                    None
                }
            }
        };
        let io = |err| ArchiveError::io(&name, err);
        if e.kind == Kind::Manifest {
            if !first {
                problems.push(format!("{MANIFEST} is not the first entry"));
            }
            let data = e.read_all().map_err(io)?;
            match serde_json::from_slice::<Manifest>(&data) {
                Ok(m) => manifest = Some((m, data)),
                Err(err) => problems.push(format!("{MANIFEST}: {err}")),
            }
            return Ok(());
        }
        if e.kind == Kind::Signature {
            let data = e.read_all().map_err(io)?;
            match serde_json::from_slice::<SignatureEntry>(&data) {
                Ok(s) => signature = Some(s),
                Err(err) => problems.push(format!("{SIGNATURE}: {err}")),
            }
            return Ok(());
        }
        if !e.kind.parsed() {
            let digest = e.hash().map_err(io)?;
            if let Some(d) = name.strip_prefix("blobs/") {
                if d != digest {
                    problems.push(format!("{name}: content hashes to {digest}"));
                }
                c.blobs.insert(d.to_string());
            }
            seen.insert(name.clone(), (e.size, digest));
            return Ok(());
        }
        let data = e.read_all().map_err(io)?;
        let digest = crate::key::hash_hex(&data);
        seen.insert(name.clone(), (data.len() as u64, digest));
        let Some(v) = parse(&data, &mut problems) else {
            return Ok(());
        };
        match e.kind {
            Kind::Record => match serde_json::from_value::<ArchivedRecord>(v) {
                Ok(r) => {
                    let file = name.strip_prefix("records/").unwrap_or("");
                    if file.strip_suffix(".json") != Some(r.key.as_str()) {
                        problems.push(format!("{name}: holds the record of key {}", r.key));
                    }
                    c.records.insert(r.key.clone(), r);
                }
                Err(err) => problems.push(format!("{name}: {err}")),
            },
            Kind::Latest => match serde_json::from_value(v) {
                Ok(l) => c.latest = l,
                Err(err) => problems.push(format!("{name}: {err}")),
            },
            Kind::Runs => match serde_json::from_value(v) {
                Ok(r) => c.runs = r,
                Err(err) => problems.push(format!("{name}: {err}")),
            },
            Kind::Table => match serde_json::from_value::<TableDump>(v) {
                Ok(t) => {
                    if let Err(m) = t.validate() {
                        problems.push(format!("{name}: {m}"));
                    } else if name != format!("tables/{}.json", t.name) {
                        problems.push(format!("{name}: holds table `{}`", t.name));
                    } else {
                        c.tables.push(t);
                    }
                }
                Err(err) => problems.push(format!("{name}: {err}")),
            },
            _ => {}
        }
        Ok(())
    })?;
    let Some((m, manifest_bytes)) = manifest else {
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

    // Records: keys, output digests and measurement digests recompute; timings follow from
    // samples; their blobs are there.
    let missing: BTreeSet<&str> = m.missing_blobs.iter().map(String::as_str).collect();
    let run_ids: BTreeSet<i64> = c.runs.iter().map(|r| r.run_id).collect();
    let mut inputs: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for e in &m.records {
        let Some(r) = c.records.get(&e.key) else {
            problems.push(format!("record {} ({}): missing", e.key, e.step));
            continue;
        };
        if r.step_id != e.step
            || r.kind != e.kind
            || r.status != e.status
            || r.output_digest != e.output_digest
        {
            problems.push(format!("record {}: differs from the manifest", e.key));
        }
        if r.components.key() != r.key {
            problems.push(format!(
                "record {} ({}): its components hash to key {}",
                e.key,
                e.step,
                r.components.key()
            ));
        }
        if crate::key::output_digest(&r.result, &r.files) != r.output_digest {
            problems.push(format!(
                "record {} ({}): its result no longer hashes to its output digest",
                e.key, e.step
            ));
        }
        if r.measurements_digest() != e.measurements {
            problems.push(format!(
                "record {} ({}): its timings or samples differ from the manifest's measurement digest",
                e.key, e.step
            ));
        }
        problems.extend(measurement_problems(r, &run_ids));
        for (name, d) in &r.files {
            if !c.blobs.contains(d.as_str()) && !missing.contains(d.as_str()) {
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
    if c.records.len() != m.records.len() {
        problems.push(format!(
            "{} records in the archive, {} in the manifest",
            c.records.len(),
            m.records.len()
        ));
    }
    for l in &c.latest {
        match c.records.get(&l.key) {
            None => problems.push(format!("latest {}: record {} is missing", l.step_id, l.key)),
            Some(r) if r.step_id != l.step_id || l.components.key() != l.key => {
                problems.push(format!(
                    "latest {}: does not match record {} ({})",
                    l.step_id, l.key, r.step_id
                ))
            }
            _ => {}
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

    // The signature covers the manifest, hence everything above.
    let mut signed_by = None;
    if let Some(sig) = &signature {
        match sign::check(&manifest_bytes, sig) {
            Ok(k) => {
                signed_by = Some(SignedBy {
                    fingerprint: k.fingerprint(),
                    comment: k.comment.clone(),
                    trusted: opts.trusted.iter().any(|t| t.key == k.key),
                })
            }
            Err(m) => problems.push(format!("{SIGNATURE}: {m}")),
        }
    }
    if !opts.trusted.is_empty() && !signed_by.as_ref().is_some_and(|s| s.trusted) {
        let keys: Vec<String> = opts.trusted.iter().map(PublicKey::fingerprint).collect();
        problems.push(match (&signature, &signed_by) {
            (None, _) => format!(
                "unsigned, but a signature by {} is required",
                keys.join(" or ")
            ),
            (Some(_), Some(s)) => format!(
                "signed by {} ({}), not by the trusted key {}",
                s.fingerprint,
                s.comment,
                keys.join(" or ")
            ),
            (Some(_), None) => format!(
                "the signature does not check, and a signature by {} is required",
                keys.join(" or ")
            ),
        });
    }

    if !problems.is_empty() {
        return Err(ArchiveError::Invalid {
            path: path.to_path_buf(),
            problems,
        });
    }
    let v = Verified {
        path: path.to_path_buf(),
        jb_version: m.jb_version,
        entries: seen.len() + 1 + signature.is_some() as usize,
        records: c.records.len(),
        blobs: c.blobs.len(),
        sources: m.sources.len(),
        bytes: total,
        signature: signed_by,
    };
    Ok((v, c))
}
