//! Cross-process locks under `<cache>/locks/`: `flock` on one file per device slot (so two jb
//! processes on one machine never measure at once), and for step keys (so concurrent builds wait
//! for an identical in-flight step instead of repeating it) one byte per key in one shared file,
//! `keys.lock`, with open-file-description byte-range locks (Linux; elsewhere one file per key).
//! One file for every key: a build no longer creates a file per step (file creation in a folder
//! full of recently deleted files was a quarter of a cold build's CPU time here).
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

/// The lock file of a step key where byte-range locks are not used (not Linux).
pub fn key_lock_path(cache_dir: &Path, key: &str) -> PathBuf {
    let short = &key[..key.len().min(32)];
    cache_dir.join("locks").join(format!("key-{short}.lock"))
}

/// The one file whose bytes are the step keys' locks.
pub fn keys_lock_path(cache_dir: &Path) -> PathBuf {
    cache_dir.join("locks").join("keys.lock")
}

/// The byte of `keys.lock` that stands for `key`: its first 60 bits (keys are blake3 hex; two
/// keys sharing a byte would only make one build wait for the other, never share a result).
fn key_offset(key: &str) -> i64 {
    let hex: String = key
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(15)
        .collect();
    match u64::from_str_radix(&hex, 16) {
        Ok(v) if hex.len() == 15 => v as i64,
        _ => {
            (u64::from_le_bytes(
                blake3::hash(key.as_bytes()).as_bytes()[..8]
                    .try_into()
                    .expect("8 bytes"),
            ) >> 4) as i64
        }
    }
}

/// Take the exclusive lock of step `key`, waiting (and polling `cancel`) while another build
/// holds it.
pub fn acquire_key(cache_dir: &Path, key: &str, cancel: &CancelFlag) -> std::io::Result<Acquired> {
    #[cfg(target_os = "linux")]
    {
        let path = keys_lock_path(cache_dir);
        let offset = key_offset(key);
        acquire_with(&path, cancel, move |f| try_byte_lock(f, offset))
    }
    #[cfg(not(target_os = "linux"))]
    {
        acquire(&key_lock_path(cache_dir, key), cancel)
    }
}

/// An exclusive open-file-description lock on one byte: it belongs to this open of the file
/// (so threads of one process exclude each other too) and goes when the file is closed.
#[cfg(target_os = "linux")]
fn try_byte_lock(file: &File, offset: i64) -> std::io::Result<bool> {
    // SAFETY: an all-zero `flock` is a valid value of the plain C struct; fields set below.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = offset as libc::off_t;
    fl.l_len = 1;
    // SAFETY: fcntl reads the struct we pass for the duration of the call only.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &fl) };
    if rc == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EACCES) => Ok(false),
        _ => Err(err),
    }
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
    acquire_with(path, cancel, try_flock)
}

fn acquire_with(
    path: &Path,
    cancel: &CancelFlag,
    try_lock: impl Fn(&File) -> std::io::Result<bool>,
) -> std::io::Result<Acquired> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    if try_lock(&file)? {
        return Ok(Acquired::Free(FileLock { _file: file }));
    }
    let mut wait = Duration::from_millis(5);
    loop {
        if cancel.is_cancelled() {
            return Ok(Acquired::Cancelled);
        }
        std::thread::sleep(wait);
        wait = (wait * 2).min(Duration::from_millis(100));
        if try_lock(&file)? {
            return Ok(Acquired::Waited(FileLock { _file: file }));
        }
    }
}

/// Remove the per-key lock files (of older jb versions, or not Linux) no build holds now (`jb
/// cache gc`); returns how many. A build that
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
    fn key_locks_exclude_threads_and_keys_are_independent() {
        let dir = tempfile::tempdir().unwrap();
        let cancel = CancelFlag::default();
        let a = "5a4d5b1ccd5a647986651a166fbb26c6aa";
        let b = "0a4d5b1ccd5a647986651a166fbb26c6aa";
        let first = acquire_key(dir.path(), a, &cancel).unwrap();
        assert!(matches!(first, Acquired::Free(_)));
        // Another key is free while the first is held.
        assert!(matches!(
            acquire_key(dir.path(), b, &cancel).unwrap(),
            Acquired::Free(_)
        ));
        let root = dir.path().to_path_buf();
        let waiter =
            std::thread::spawn(move || acquire_key(&root, a, &CancelFlag::default()).unwrap());
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !waiter.is_finished(),
            "the same key waits, even in one process"
        );
        drop(first);
        assert!(matches!(waiter.join().unwrap(), Acquired::Waited(_)));
        assert_ne!(key_offset(a), key_offset(b));
        assert!(key_offset("not hex at all") >= 0);
    }

    #[test]
    fn waiting_stops_on_cancel() {
        let dir = tempfile::tempdir().unwrap();
        let _held = acquire_key(dir.path(), "abc", &CancelFlag::default()).unwrap();
        let cancel = CancelFlag::default();
        cancel.cancel();
        assert!(matches!(
            acquire_key(dir.path(), "abc", &cancel).unwrap(),
            Acquired::Cancelled
        ));
    }
}
