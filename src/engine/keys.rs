//! Computing a step's key components from its definition, its inputs, its upstream outputs and
//! the environment.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde_json::Value;

use crate::error::{JbError, Result};
use crate::key::{hash_hex, KeyComponents};
use crate::pipeline::Step;

/// What keys depend on besides the step itself.
#[derive(Debug, Clone, Default)]
pub struct KeyContext {
    /// Environment fingerprint (python, jax, jaxlib, tokamax versions, platform, device...).
    pub fingerprint: BTreeMap<String, String>,
    /// Hash of the Python worker's source.
    pub worker_hash: String,
    pub scale: String,
    /// A global salt (env `JB_SALT`).
    pub salt: Option<String>,
    /// The device peak profile steps judge their roofline against (`{flops_per_s, bytes_per_s,
    /// source, device}`), passed to every executor. Published figures are part of a profile
    /// step's key (a result judged against one peak never stands in for another); a peak jb
    /// doctor measured is not (it moves with every measurement, and on the CPU the guard only
    /// flags).
    pub peak: Option<Value>,
}

impl KeyContext {
    /// The peak as a key component, where it is one.
    pub fn peak_in_key(&self) -> Option<&Value> {
        self.peak
            .as_ref()
            .filter(|p| p.get("source").and_then(Value::as_str) == Some("published"))
    }
}

/// Hashes of input files, computed once per build.
#[derive(Debug, Default)]
pub struct FileHashes {
    cache: HashMap<String, String>,
}

impl FileHashes {
    pub fn hash(&mut self, root: &Path, rel: &str) -> Result<String> {
        if let Some(h) = self.cache.get(rel) {
            return Ok(h.clone());
        }
        let path = root.join(rel);
        let data = std::fs::read(&path).map_err(|e| JbError::io(&path, e))?;
        let h = hash_hex(&data);
        self.cache.insert(rel.to_string(), h.clone());
        Ok(h)
    }
}

/// The components of `step`'s key; `dep_outputs` maps upstream step ids to output digests.
pub fn components(
    step: &Step,
    root: &Path,
    dep_outputs: &[(String, String)],
    ctx: &KeyContext,
    files: &mut FileHashes,
) -> Result<KeyComponents> {
    let mut c = KeyComponents::new();
    c.set("kind", step.kind.as_str());
    match &step.params {
        Value::Object(m) => {
            for (k, v) in m {
                c.set_json(format!("param:{k}"), v);
            }
        }
        Value::Null => {}
        other => c.set_json("param:", other),
    }
    if let Some(run) = &step.run {
        c.set("run", hash_hex(run.as_bytes()));
    }
    if !step.outputs.is_empty() {
        c.set_json("outputs", &serde_json::json!(step.outputs));
    }
    for input in &step.inputs {
        c.set(format!("input:{input}"), files.hash(root, input)?);
    }
    for (id, digest) in dep_outputs {
        c.set(format!("dep:{id}"), digest.clone());
    }
    if step.kind.uses_python() {
        for (k, v) in &ctx.fingerprint {
            c.set(format!("env:{k}"), v.clone());
        }
        c.set("worker", ctx.worker_hash.clone());
        c.set("scale", ctx.scale.clone());
    }
    if step.kind.is_measurement() {
        if let Some(peak) = ctx.peak_in_key() {
            c.set_json("peak", peak);
        }
    }
    if let Some(s) = &step.salt {
        c.set("salt", s.clone());
    }
    if let Some(s) = &ctx.salt {
        c.set("salt:global", s.clone());
    }
    Ok(c)
}

/// Hash of every `.py` file of the worker package (sorted by path).
pub fn worker_source_hash(python_dir: &Path) -> String {
    let mut files = crate::pipeline::paths::expand_files(python_dir, "jb");
    files.retain(|f| f.ends_with(".py"));
    let mut h = blake3::Hasher::new();
    for f in files {
        h.update(f.as_bytes());
        h.update(&std::fs::read(python_dir.join(&f)).unwrap_or_default());
    }
    h.finalize().to_hex().to_string()
}
