//! `jb list workloads`' cache of the worker's `describe` answers: one JSON file per answer in
//! `<cache>/describe/<key>.json`, keyed by the workload folder's files (names and contents),
//! the scale, the environment fingerprint and the worker's Python sources. An edit of any of
//! them describes that workload again; everything else is read back.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The key of one workload's description.
pub fn key(
    root: &Path,
    folder: &str,
    scale: &str,
    fingerprint: &BTreeMap<String, String>,
    worker_hash: &str,
) -> String {
    let mut h = blake3::Hasher::new();
    h.update(b"jb-describe-1\0");
    let mut files = crate::pipeline::paths::expand_files(root, folder);
    files.retain(|f| !f.contains("__pycache__") && !f.ends_with(".pyc"));
    files.sort();
    for f in files {
        h.update(f.as_bytes());
        h.update(b"\0");
        let content = std::fs::read(root.join(&f)).unwrap_or_default();
        h.update(crate::key::hash_hex(&content).as_bytes());
        h.update(b"\0");
    }
    for part in [scale, worker_hash] {
        h.update(part.as_bytes());
        h.update(b"\0");
    }
    for (k, v) in fingerprint {
        h.update(format!("{k}={v}\0").as_bytes());
    }
    h.finalize().to_hex().to_string()
}

fn path_of(cache_dir: &Path, key: &str) -> PathBuf {
    cache_dir.join("describe").join(format!("{key}.json"))
}

/// A cached description (none when absent or unreadable).
pub fn get(cache_dir: &Path, key: &str) -> Option<Value> {
    let text = std::fs::read_to_string(path_of(cache_dir, key)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Keep a description (best effort: a read-only cache only costs the next listing time).
pub fn put(cache_dir: &Path, key: &str, value: &Value) {
    let p = path_of(cache_dir, key);
    if let Some(dir) = p.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let tmp = p.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, value.to_string()).is_ok() {
        let _ = std::fs::rename(&tmp, &p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_follows_the_workload_sources_and_scale() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir_all(root.join("workloads/w")).unwrap();
        std::fs::write(root.join("workloads/w/workload.py"), "A = 1\n").unwrap();
        let fp = BTreeMap::from([("jax".to_string(), "0.12".to_string())]);
        let k1 = key(root, "workloads/w", "cpu", &fp, "h");
        assert_eq!(k1, key(root, "workloads/w", "cpu", &fp, "h"));
        assert_ne!(k1, key(root, "workloads/w", "tiny", &fp, "h"));
        assert_ne!(k1, key(root, "workloads/w", "cpu", &fp, "h2"));
        // A helper module beside workload.py is a source too.
        std::fs::write(root.join("workloads/w/helper.py"), "B = 2\n").unwrap();
        let k2 = key(root, "workloads/w", "cpu", &fp, "h");
        assert_ne!(k1, k2);
        std::fs::write(root.join("workloads/w/helper.py"), "B = 3\n").unwrap();
        assert_ne!(k2, key(root, "workloads/w", "cpu", &fp, "h"));
        put(root, &k1, &serde_json::json!({"flops": 5}));
        assert_eq!(get(root, &k1), Some(serde_json::json!({"flops": 5})));
        assert_eq!(get(root, &k2), None);
    }
}
