//! Content-addressed blobs: `cas/<first two hex>/<rest>` by blake3 digest. Writes go to a temp
//! file and are renamed into place; every read verifies the digest.
//!
//! Blobs are not fsynced: a process killed at any point leaves either no blob or a whole one
//! (rename is atomic), and a blob lost or truncated by a power cut fails its digest check on the
//! next read, so the step that made it runs again.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{JbError, Result};

/// Blobs up to this size are verified on every cache hit (see [`Cas::check`]): results, logs,
/// small outputs. Larger ones - profiler traces (0.4-1 MiB each at tiny scale: 9 MB read and
/// hashed by every no-op `jb build all` when this was 1 MiB), exported programs - are verified
/// whenever they are read.
pub const CHECK_INLINE_MAX: u64 = 64 << 10;

#[derive(Debug, Clone)]
pub struct Cas {
    root: PathBuf,
}

/// A blob whose content no longer matches its digest.
#[derive(Debug, thiserror::Error)]
#[error("corrupt blob {digest} at {path}: content hashes to {actual}")]
pub struct Corrupt {
    pub digest: String,
    pub path: PathBuf,
    pub actual: String,
}

impl Cas {
    pub fn open(cache_dir: &Path) -> Result<Cas> {
        let root = cache_dir.join("cas");
        for d in [&root, &cache_dir.join("tmp")] {
            std::fs::create_dir_all(d).map_err(|e| JbError::io(d, e))?;
        }
        Ok(Cas { root })
    }

    pub fn path_of(&self, digest: &str) -> PathBuf {
        self.root
            .join(&digest[..2.min(digest.len())])
            .join(&digest[2.min(digest.len())..])
    }

    fn tmp_dir(&self) -> PathBuf {
        self.root
            .parent()
            .map(|p| p.join("tmp"))
            .unwrap_or_else(|| self.root.join("tmp"))
    }

    pub fn contains(&self, digest: &str) -> bool {
        self.path_of(digest).is_file()
    }

    pub fn put_bytes(&self, data: &[u8]) -> Result<String> {
        let digest = blake3::hash(data).to_hex().to_string();
        if self.verify(&digest).is_ok() {
            return Ok(digest);
        }
        let tmp_dir = self.tmp_dir();
        let mut tmp =
            tempfile::NamedTempFile::new_in(&tmp_dir).map_err(|e| JbError::io(&tmp_dir, e))?;
        tmp.write_all(data)
            .map_err(|e| JbError::io(tmp.path(), e))?;
        self.install(tmp, &digest)?;
        Ok(digest)
    }

    /// Store a file's content (streamed); returns its digest.
    pub fn put_file(&self, path: &Path) -> Result<String> {
        let tmp_dir = self.tmp_dir();
        let mut tmp =
            tempfile::NamedTempFile::new_in(&tmp_dir).map_err(|e| JbError::io(&tmp_dir, e))?;
        let mut src = std::fs::File::open(path).map_err(|e| JbError::io(path, e))?;
        let mut hasher = blake3::Hasher::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = src.read(&mut buf).map_err(|e| JbError::io(path, e))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            tmp.write_all(&buf[..n])
                .map_err(|e| JbError::io(tmp.path(), e))?;
        }
        let digest = hasher.finalize().to_hex().to_string();
        if self.verify(&digest).is_ok() {
            return Ok(digest);
        }
        self.install(tmp, &digest)?;
        Ok(digest)
    }

    fn install(&self, tmp: tempfile::NamedTempFile, digest: &str) -> Result<()> {
        let dest = self.path_of(digest);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| JbError::io(parent, e))?;
        }
        tmp.persist(&dest)
            .map_err(|e| JbError::io(&dest, e.error))?;
        Ok(())
    }

    /// Read a blob, verifying its digest.
    pub fn get(&self, digest: &str) -> Result<Vec<u8>, BlobError> {
        let path = self.path_of(digest);
        let data = std::fs::read(&path).map_err(|_| BlobError::Missing(digest.to_string()))?;
        let actual = blake3::hash(&data).to_hex().to_string();
        if actual != digest {
            return Err(BlobError::Corrupt(Corrupt {
                digest: digest.to_string(),
                path,
                actual,
            }));
        }
        Ok(data)
    }

    /// The check a cache hit makes: a blob up to [`CHECK_INLINE_MAX`] bytes is read and its
    /// digest verified; a larger one (a profiler trace) must exist, and its content is verified
    /// whenever it is read ([`Cas::get`], [`Cas::restore`]) — so a no-op build does not re-hash
    /// every trace it keeps.
    pub fn check(&self, digest: &str) -> Result<(), BlobError> {
        let path = self.path_of(digest);
        match std::fs::metadata(&path) {
            Ok(m) if m.is_file() && m.len() > CHECK_INLINE_MAX => Ok(()),
            Ok(m) if m.is_file() => self.verify(digest),
            _ => Err(BlobError::Missing(digest.to_string())),
        }
    }

    /// Check a blob without keeping its content.
    pub fn verify(&self, digest: &str) -> Result<(), BlobError> {
        self.get(digest).map(|_| ())
    }

    /// Copy a blob to `dest` (atomically), verifying it.
    pub fn restore(&self, digest: &str, dest: &Path) -> Result<(), BlobError> {
        let data = self.get(digest)?;
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| BlobError::Io(e.to_string()))?;
        }
        let dir = dest.parent().unwrap_or(Path::new("."));
        let mut tmp =
            tempfile::NamedTempFile::new_in(dir).map_err(|e| BlobError::Io(e.to_string()))?;
        tmp.write_all(&data)
            .map_err(|e| BlobError::Io(e.to_string()))?;
        tmp.persist(dest)
            .map_err(|e| BlobError::Io(e.error.to_string()))?;
        Ok(())
    }

    pub fn remove(&self, digest: &str) {
        let _ = std::fs::remove_file(self.path_of(digest));
    }

    /// Every blob digest present.
    pub fn list(&self) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        let Ok(dirs) = std::fs::read_dir(&self.root) else {
            return out;
        };
        for d in dirs.flatten() {
            let prefix = d.file_name().to_string_lossy().to_string();
            if let Ok(files) = std::fs::read_dir(d.path()) {
                for f in files.flatten() {
                    let size = f.metadata().map(|m| m.len()).unwrap_or(0);
                    out.push((format!("{prefix}{}", f.file_name().to_string_lossy()), size));
                }
            }
        }
        out
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    #[error("blob {0} is missing")]
    Missing(String),
    #[error(transparent)]
    Corrupt(Corrupt),
    #[error("{0}")]
    Io(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let cas = Cas::open(dir.path()).unwrap();
        let d = cas.put_bytes(b"hello").unwrap();
        assert_eq!(cas.get(&d).unwrap(), b"hello");
        std::fs::write(cas.path_of(&d), b"hellO").unwrap();
        assert!(matches!(cas.get(&d), Err(BlobError::Corrupt(_))));
        assert!(matches!(cas.check(&d), Err(BlobError::Corrupt(_))));
        // Putting the same content again repairs it.
        cas.put_bytes(b"hello").unwrap();
        assert_eq!(cas.get(&d).unwrap(), b"hello");
    }

    #[test]
    fn a_cache_hit_checks_large_blobs_for_presence_only() {
        let dir = tempfile::tempdir().unwrap();
        let cas = Cas::open(dir.path()).unwrap();
        let big = vec![7u8; (CHECK_INLINE_MAX + 1) as usize];
        let d = cas.put_bytes(&big).unwrap();
        let mut bad = big.clone();
        bad[0] = 8;
        std::fs::write(cas.path_of(&d), &bad).unwrap();
        assert!(cas.check(&d).is_ok());
        assert!(
            matches!(cas.get(&d), Err(BlobError::Corrupt(_))),
            "reading verifies"
        );
        cas.remove(&d);
        assert!(matches!(cas.check(&d), Err(BlobError::Missing(_))));
    }
}
