//! The cache: content-addressed blobs plus the SQLite run database.

pub mod cas;
pub mod db;
pub mod gc;
pub mod stats;

use std::path::{Path, PathBuf};

pub use cas::{BlobError, Cas};
pub use db::{ActionRecord, Db, Write};
pub use stats::CacheStats;

use crate::error::Result;

pub struct Cache {
    pub dir: PathBuf,
    pub cas: Cas,
    pub db: Db,
}

impl Cache {
    pub fn open(dir: &Path) -> Result<Cache> {
        std::fs::create_dir_all(dir).map_err(|e| crate::error::JbError::io(dir, e))?;
        Ok(Cache {
            dir: dir.to_path_buf(),
            cas: Cas::open(dir)?,
            db: Db::open(&dir.join("jb.sqlite"))?,
        })
    }

    /// A record is usable when every blob it names is present and intact (see [`Cas::check`]:
    /// large blobs are checked for presence here, for content when read). Returns the digests
    /// that are not (a corrupt blob is removed, so the step recomputes and rewrites it).
    pub fn check_blobs(&self, rec: &ActionRecord) -> Vec<(String, BlobError)> {
        let mut bad = Vec::new();
        for digest in rec.files.values() {
            if let Err(e) = self.cas.check(digest) {
                if matches!(e, BlobError::Corrupt(_)) {
                    self.cas.remove(digest);
                }
                bad.push((digest.clone(), e));
            }
        }
        bad
    }
}
