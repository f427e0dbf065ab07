//! The scratch folders steps write their files to (`StepRequest::out_dir`). A finished
//! `command` step's folder is emptied and handed to the next step within the build instead of
//! being removed and created again (on ext4 a new inode next to many recently deleted ones costs a
//! scan; with two files per step it was a quarter of a cold build's CPU time). The folders are
//! removed when the build ends; one left by a killed build is an empty `step-*` folder under
//! `<cache>/tmp`, which `jb cache gc` removes with the rest of `tmp`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[derive(Debug)]
pub struct StepDirs {
    tmp: PathBuf,
    free: Mutex<Vec<PathBuf>>,
}

impl StepDirs {
    pub fn new(tmp: &Path) -> Self {
        StepDirs {
            tmp: tmp.to_path_buf(),
            free: Mutex::new(Vec::new()),
        }
    }

    /// An empty folder of this build's own.
    pub fn take(&self) -> std::io::Result<PathBuf> {
        if let Some(d) = self.lock().pop() {
            return Ok(d);
        }
        std::fs::create_dir_all(&self.tmp)?;
        Ok(tempfile::Builder::new()
            .prefix("step-")
            .tempdir_in(&self.tmp)?
            .keep())
    }

    /// A step is done with `dir`: empty it for the next one where `reuse` (removed instead,
    /// or where it cannot be emptied, e.g. a step made a read-only folder in it). jb reuses the
    /// folders of `command` steps only: a worker step's folder may have been a sandbox's
    /// scratch, and a fresh folder is out of reach of anything the sandbox left running.
    pub fn give_back(&self, dir: PathBuf, reuse: bool) {
        if reuse && empty(&dir).is_ok() {
            self.lock().push(dir);
        } else {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<PathBuf>> {
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for StepDirs {
    fn drop(&mut self) {
        for d in self.lock().drain(..) {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// Remove everything inside `dir` (not following symbolic links), keeping `dir`.
fn empty(dir: &Path) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(std::io::Error::other("not a folder"));
    }
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let p = e.path();
        if e.file_type()?.is_dir() {
            std::fs::remove_dir_all(&p)?;
        } else {
            std::fs::remove_file(&p)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_comes_back_empty_and_goes_with_the_pool() {
        let tmp = tempfile::tempdir().unwrap();
        let pool = StepDirs::new(&tmp.path().join("tmp"));
        let a = pool.take().unwrap();
        std::fs::create_dir_all(a.join("trace/deep")).unwrap();
        std::fs::write(a.join("trace/deep/x.json"), "{}").unwrap();
        std::fs::write(a.join("result.json"), "{}").unwrap();
        std::os::unix::fs::symlink("/etc", a.join("link")).unwrap();
        pool.give_back(a.clone(), true);
        let b = pool.take().unwrap();
        assert_eq!(a, b, "reused");
        assert_eq!(std::fs::read_dir(&b).unwrap().count(), 0, "emptied");
        assert!(
            Path::new("/etc").is_dir(),
            "a link is removed, not followed"
        );
        let c = pool.take().unwrap();
        assert_ne!(b, c, "a folder in use is never handed out twice");
        pool.give_back(b.clone(), true);
        pool.give_back(c.clone(), false);
        assert!(!c.exists(), "not reused: removed at once");
        assert_eq!(pool.take().unwrap(), b);
        pool.give_back(b.clone(), true);
        drop(pool);
        assert!(!b.exists());
    }
}
