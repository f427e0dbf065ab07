//! Sandboxed export workers started one ahead (issue 21 item 2).
//!
//! A candidate's export stage needs a fresh sandboxed worker: a scratch folder with its sized
//! mount, a jail (cgroup, seccomp filter) and a Python process that has imported JAX, seconds
//! before any candidate code is involved. None of that depends on the candidate, so while one
//! export runs the next one's sandbox is started in the background. Each prepared sandbox is
//! used by exactly one candidate and then discarded, as a fresh one is: no process, folder or
//! jail is ever shared between candidates. A sandbox is taken only for the same settings it was
//! started with (device, memory cap, cache, sandbox), and never for a step that uses a device
//! (an exclusive TPU must not be opened ahead of its turn): export steps only, which jb runs
//! on the CPU.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::python::{Worker, WorkerSpec};
use super::sandbox::{self, Jail, Sandbox};
use super::CancelFlag;

/// What a prepared sandbox was started for: it is used only for a step that asks the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub memory_mb: Option<u64>,
    pub cache_dir: PathBuf,
    pub bwrap: PathBuf,
    /// The worker's environment (device settings and the export's own included).
    pub env: Vec<(String, String)>,
}

/// A fresh sandbox's folders and limits, as every sandboxed step gets them: a private scratch
/// folder outside the cache (with `out/` and `candidate/` in it), the folder its products are
/// copied to, and the jail (the sized scratch mount goes over the empty folder first).
pub fn fresh_jail(
    sb: &Sandbox,
    cache_dir: &Path,
    memory_mb: Option<u64>,
) -> Result<(tempfile::TempDir, tempfile::TempDir, Jail), String> {
    let scratch = sandbox::scratch_dir(cache_dir)
        .map_err(|e| format!("cannot create a sandbox scratch folder: {e}"))?;
    let staging = super::products::staging(scratch.path())
        .map_err(|e| format!("cannot create a products folder: {e}"))?;
    let jail = Jail::start(sb, scratch.path(), memory_mb);
    for d in ["out", "candidate"] {
        let p = scratch.path().join(d);
        std::fs::create_dir_all(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok((scratch, staging, jail))
}

/// One sandbox ready for one candidate: its folders, its jail and its started worker.
pub struct Prepared {
    pub settings: Settings,
    pub scratch: tempfile::TempDir,
    pub staging: tempfile::TempDir,
    pub jail: Jail,
    pub worker: Worker,
}

impl Prepared {
    /// A fresh sandbox as `run_jailed` makes one (scratch, products folder, jail, `out/` and
    /// `candidate/` folders) with its worker started and ready.
    pub fn start(sb: &Sandbox, spec: &WorkerSpec, settings: Settings) -> Result<Prepared, String> {
        let (scratch, staging, jail) = fresh_jail(sb, &settings.cache_dir, settings.memory_mb)?;
        let worker = Worker::start(
            spec,
            Duration::from_secs(300),
            Some((sb, scratch.path(), &jail)),
            &CancelFlag::default(),
        )?;
        Ok(Prepared {
            settings,
            scratch,
            staging,
            jail,
            worker,
        })
    }
}

/// A sandbox to start: what for, with which sandbox and worker command.
type Job = (Sandbox, WorkerSpec, Settings);

/// The sandboxes started ahead, and whether one is being started now. They are started by one
/// long-lived thread: a worker's `PR_SET_PDEATHSIG` fires when the thread that started it
/// ends, so the thread must outlive the workers it starts (it ends with the executor).
#[derive(Default, Clone)]
pub struct Ahead {
    ready: Arc<Mutex<Vec<Prepared>>>,
    starting: Arc<Mutex<usize>>,
    jobs: Arc<Mutex<Option<std::sync::mpsc::Sender<Job>>>>,
}

/// At most this many prepared sandboxes are kept (each holds a Python process with JAX).
const KEEP: usize = 1;

impl Ahead {
    /// A prepared sandbox for `settings`, if one is ready (it is removed: used once).
    pub fn take(&self, settings: &Settings) -> Option<Prepared> {
        let mut ready = self.ready.lock().unwrap_or_else(|p| p.into_inner());
        let i = ready.iter().position(|p| &p.settings == settings)?;
        Some(ready.swap_remove(i))
    }

    /// Start one more sandbox for `settings` in the background unless enough are ready or
    /// starting. A failure to start is dropped: the next step starts its own, as without this.
    pub fn start_one(&self, sb: &Sandbox, spec: &WorkerSpec, settings: Settings) {
        {
            let ready = self.ready.lock().unwrap_or_else(|p| p.into_inner());
            let mut starting = self.starting.lock().unwrap_or_else(|p| p.into_inner());
            if ready.len() + *starting >= KEEP {
                return;
            }
            *starting += 1;
        }
        let mut jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        let tx = jobs.get_or_insert_with(|| {
            let (tx, rx) = std::sync::mpsc::channel::<Job>();
            let (ready, starting) = (Arc::downgrade(&self.ready), self.starting.clone());
            std::thread::spawn(move || {
                for (sb, spec, settings) in rx {
                    let prepared = Prepared::start(&sb, &spec, settings);
                    if let (Some(ready), Ok(p)) = (ready.upgrade(), prepared) {
                        let mut ready = ready.lock().unwrap_or_else(|p| p.into_inner());
                        // Settings changed meanwhile: only the latest are kept.
                        ready.retain(|r| r.settings == p.settings);
                        ready.push(p);
                        while ready.len() > KEEP {
                            ready.remove(0);
                        }
                    }
                    *starting.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
                }
            });
            tx
        });
        if tx.send((sb.clone(), spec.clone(), settings)).is_err() {
            *self.starting.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
        }
    }

    /// Drop every prepared sandbox (their workers are shut down, their folders removed).
    pub fn clear(&self) {
        let drained: Vec<Prepared> =
            std::mem::take(&mut *self.ready.lock().unwrap_or_else(|p| p.into_inner()));
        drop(drained);
    }

    /// How many are ready now (for tests).
    pub fn ready_count(&self) -> usize {
        self.ready.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}
