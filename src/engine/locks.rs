//! Cross-process locks under `<cache>/locks/`: `flock` on one file per device slot (so two jb
//! processes on one machine never measure at once) and one file per step key (so concurrent
//! builds wait for an identical in-flight step instead of repeating it).
//!
//! A lock is released when its [`FileLock`] is dropped, or by the kernel when the process dies
//! (kill -9 included): no stale lock survives its holder.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::exec::CancelFlag;

/// A held exclusive lock.
#[derive(Debug)]
pub struct FileLock {
    _file: File,
}

/// How acquiring went.
#[derive(Debug)]
pub enum Acquired {
    /// Held at once.
    Free(FileLock),
    /// Held after another holder let go.
    Waited(FileLock),
    /// Given up: the build was cancelled while waiting.
    Cancelled,
}

impl Acquired {
    pub fn into_lock(self) -> Option<FileLock> {
        match self {
            Acquired::Free(l) | Acquired::Waited(l) => Some(l),
            Acquired::Cancelled => None,
        }
    }
}

/// The lock file of device slot `n`.
pub fn device_lock_path(cache_dir: &Path, n: u32) -> PathBuf {
    cache_dir.join("locks").join(format!("device-{n}.lock"))
}

/// The lock file of a step key.
pub fn key_lock_path(cache_dir: &Path, key: &str) -> PathBuf {
    let short = &key[..key.len().min(32)];
    cache_dir.join("locks").join(format!("key-{short}.lock"))
}

fn try_flock(file: &File) -> std::io::Result<bool> {
    // SAFETY: flock on a file descriptor we own; no memory is shared with the kernel.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(err)
    }
}

/// Take the exclusive lock on `path`, waiting (and polling `cancel`) while another holds it.
pub fn acquire(path: &Path, cancel: &CancelFlag) -> std::io::Result<Acquired> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    if try_flock(&file)? {
        return Ok(Acquired::Free(FileLock { _file: file }));
    }
    let mut wait = Duration::from_millis(5);
    loop {
        if cancel.is_cancelled() {
            return Ok(Acquired::Cancelled);
        }
        std::thread::sleep(wait);
        wait = (wait * 2).min(Duration::from_millis(100));
        if try_flock(&file)? {
            return Ok(Acquired::Waited(FileLock { _file: file }));
        }
    }
}

/// Remove the key lock files no build holds now (`jb cache gc`); returns how many. A build that
/// opened a removed file just before still locks it and then re-checks the cache, so the worst
/// case of a race is one step computed twice, never a wrong result.
pub fn prune_key_locks(cache_dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(cache_dir.join("locks")) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        if !name.to_string_lossy().starts_with("key-") {
            continue;
        }
        let Ok(file) = File::open(e.path()) else {
            continue;
        };
        if try_flock(&file).unwrap_or(false) && std::fs::remove_file(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_waits_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let path = device_lock_path(dir.path(), 0);
        let cancel = CancelFlag::default();
        let first = acquire(&path, &cancel).unwrap();
        assert!(matches!(first, Acquired::Free(_)));
        let p2 = path.clone();
        let waiter = std::thread::spawn(move || acquire(&p2, &CancelFlag::default()).unwrap());
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished(), "the lock is exclusive");
        drop(first);
        assert!(matches!(waiter.join().unwrap(), Acquired::Waited(_)));
    }

    #[test]
    fn pruning_keeps_held_locks() {
        let dir = tempfile::tempdir().unwrap();
        let cancel = CancelFlag::default();
        let held = acquire(&key_lock_path(dir.path(), "held"), &cancel).unwrap();
        drop(acquire(&key_lock_path(dir.path(), "free"), &cancel).unwrap());
        drop(acquire(&device_lock_path(dir.path(), 0), &cancel).unwrap());
        assert_eq!(prune_key_locks(dir.path()), 1);
        assert!(key_lock_path(dir.path(), "held").exists());
        assert!(device_lock_path(dir.path(), 0).exists());
        drop(held);
    }

    #[test]
    fn waiting_stops_on_cancel() {
        let dir = tempfile::tempdir().unwrap();
        let path = key_lock_path(dir.path(), "abc");
        let _held = acquire(&path, &CancelFlag::default()).unwrap();
        let cancel = CancelFlag::default();
        cancel.cancel();
        assert!(matches!(
            acquire(&path, &cancel).unwrap(),
            Acquired::Cancelled
        ));
    }
}
