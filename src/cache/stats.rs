//! `jb cache stats`: the cache's sizes and the row count of each run-database table.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use super::Cache;
use crate::error::Result;

/// What `jb cache stats --json` prints (field order is the output's).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CacheStats {
    pub cache_dir: PathBuf,
    /// Blobs in the CAS.
    pub blobs: usize,
    pub blob_bytes: u64,
    /// Size of `jb.sqlite` (0 when there is none).
    pub db_bytes: u64,
    /// Rows per table of the run database.
    pub tables: BTreeMap<String, i64>,
}

impl Cache {
    /// Sizes and counts of this cache.
    pub fn stats(&self) -> Result<CacheStats> {
        let blobs = self.cas.list();
        let db_bytes = std::fs::metadata(self.dir.join("jb.sqlite"))
            .map(|m| m.len())
            .unwrap_or(0);
        Ok(CacheStats {
            cache_dir: self.dir.clone(),
            blobs: blobs.len(),
            blob_bytes: blobs.iter().map(|(_, s)| s).sum(),
            db_bytes,
            tables: self.db.counts()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_keys_in_order() {
        let s = CacheStats {
            cache_dir: "/c".into(),
            blobs: 2,
            blob_bytes: 10,
            db_bytes: 4096,
            tables: BTreeMap::from([("actions".to_string(), 3)]),
        };
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"cache_dir":"/c","blobs":2,"blob_bytes":10,"db_bytes":4096,"tables":{"actions":3}}"#
        );
    }

    #[test]
    fn stats_of_a_new_cache() {
        let dir = tempfile::tempdir().unwrap();
        let c = Cache::open(dir.path()).unwrap();
        let s = c.stats().unwrap();
        assert_eq!(s.cache_dir, dir.path());
        assert_eq!((s.blobs, s.blob_bytes), (0, 0));
        assert_eq!(s.tables.get("actions"), Some(&0));
    }
}
