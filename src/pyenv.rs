//! The Python environment jb creates for its workers from pinned requirements.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{JbError, Result};

/// Which requirements file: `cpu`, `gpu` or `tpu`.
pub fn variant_for_backend(backend: Option<&str>) -> &'static str {
    match backend {
        Some("gpu") => "gpu",
        Some("tpu") => "tpu",
        _ => "cpu",
    }
}

/// Hash of the pins of a variant (the file and anything it includes with `-r`).
pub fn pins_hash(python_dir: &Path, variant: &str) -> Result<String> {
    let mut h = blake3::Hasher::new();
    let mut todo = vec![python_dir.join(format!("requirements-{variant}.txt"))];
    let mut seen = Vec::new();
    while let Some(f) = todo.pop() {
        if seen.contains(&f) {
            continue;
        }
        let text = std::fs::read_to_string(&f).map_err(|e| JbError::io(&f, e))?;
        h.update(
            f.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .as_bytes(),
        );
        h.update(text.as_bytes());
        for line in text.lines() {
            if let Some(inc) = line.trim().strip_prefix("-r ") {
                todo.push(f.parent().unwrap_or(Path::new(".")).join(inc.trim()));
            }
        }
        seen.push(f);
    }
    Ok(format!("{variant}-{}", &h.finalize().to_hex()[..16]))
}

fn stamp_path(pyenv: &Path) -> PathBuf {
    pyenv.join(".jb-pins")
}

/// The pins the environment was built from, if it is complete.
pub fn installed_pins(pyenv: &Path) -> Option<String> {
    let python = crate::exec::python::venv_python(pyenv);
    if !python.exists() {
        return None;
    }
    std::fs::read_to_string(stamp_path(pyenv))
        .ok()
        .map(|s| s.trim().to_string())
}

/// A base interpreter to create the environment with.
fn base_python() -> String {
    if let Ok(p) = std::env::var("JB_BASE_PYTHON") {
        return p;
    }
    for cand in ["python3.11", "python3"] {
        if Command::new(cand)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
        {
            return cand.to_string();
        }
    }
    "python3".to_string()
}

struct Lock(std::fs::File);

impl Lock {
    fn acquire(path: &Path) -> Result<Lock> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| JbError::io(path, e))?;
        use std::os::unix::io::AsRawFd;
        unsafe {
            libc::flock(f.as_raw_fd(), libc::LOCK_EX);
        }
        Ok(Lock(f))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        use std::os::unix::io::AsRawFd;
        unsafe {
            libc::flock(self.0.as_raw_fd(), libc::LOCK_UN);
        }
    }
}

/// Make sure the environment at `pyenv` matches the pins; create or update it if not.
/// Returns true when it had to install.
pub fn ensure(pyenv: &Path, python_dir: &Path, variant: &str, force: bool) -> Result<bool> {
    let want = pins_hash(python_dir, variant)?;
    if !force && installed_pins(pyenv).as_deref() == Some(want.as_str()) {
        return Ok(false);
    }
    let parent = pyenv.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| JbError::io(parent, e))?;
    let _lock = Lock::acquire(&parent.join(".pyenv.lock"))?;
    // Another jb may have finished it while we waited.
    if !force && installed_pins(pyenv).as_deref() == Some(want.as_str()) {
        return Ok(false);
    }
    let log_path = parent.join("pyenv-setup.log");
    eprintln!(
        "jb: setting up the Python environment in {} from python/requirements-{variant}.txt (first use; about a minute; log: {})",
        pyenv.display(),
        log_path.display()
    );
    let mut log = std::fs::File::create(&log_path).map_err(|e| JbError::io(&log_path, e))?;
    let _ = std::fs::remove_file(stamp_path(pyenv));
    let python = crate::exec::python::venv_python(pyenv);
    if !python.exists() {
        run_logged(
            Command::new(base_python()).arg("-m").arg("venv").arg(pyenv),
            &mut log,
            "create the virtual environment",
        )?;
    }
    run_logged(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "-q",
                "-r",
            ])
            .arg(python_dir.join(format!("requirements-{variant}.txt"))),
        &mut log,
        "install the pinned requirements",
    )
    .map_err(|e| JbError::PythonEnv(format!("{e} (see {})", log_path.display())))?;
    std::fs::write(stamp_path(pyenv), &want).map_err(|e| JbError::io(stamp_path(pyenv), e))?;
    let _ = writeln!(log, "pins {want} installed");
    Ok(true)
}

fn run_logged(cmd: &mut Command, log: &mut std::fs::File, what: &str) -> Result<()> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| JbError::PythonEnv(format!("cannot {what}: {e}")))?;
    let _ = log.write_all(&out.stdout);
    let _ = log.write_all(&out.stderr);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err
            .lines()
            .rev()
            .take(5)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        return Err(JbError::PythonEnv(format!(
            "could not {what}: {}",
            tail.join(" | ")
        )));
    }
    Ok(())
}

/// The optional extras there are (`python/requirements-<name>.txt` beside the variants).
pub const EXTRAS: &[&str] = &["ray"];

fn extra_stamp(pyenv: &Path, extra: &str) -> PathBuf {
    pyenv.join(format!(".jb-extra-{extra}"))
}

fn extra_hash(python_dir: &Path, variant: &str, extra: &str) -> Result<String> {
    let file = python_dir.join(format!("requirements-{extra}.txt"));
    let text = std::fs::read_to_string(&file).map_err(|e| JbError::io(&file, e))?;
    let base = pins_hash(python_dir, variant)?;
    Ok(format!(
        "{base}+{extra}-{}",
        &blake3::hash(text.as_bytes()).to_hex()[..16]
    ))
}

/// Whether an optional extra is installed (in the current version of its pins).
pub fn has_extra(pyenv: &Path, python_dir: &Path, variant: &str, extra: &str) -> bool {
    let Ok(want) = extra_hash(python_dir, variant, extra) else {
        return false;
    };
    installed_pins(pyenv).is_some()
        && std::fs::read_to_string(extra_stamp(pyenv, extra)).is_ok_and(|s| s.trim() == want)
}

/// Install an optional extra (e.g. `ray`) into the environment, constrained by the base pins so
/// that nothing the fingerprint records changes. Returns true when it had to install.
pub fn ensure_extra(pyenv: &Path, python_dir: &Path, variant: &str, extra: &str) -> Result<bool> {
    if !EXTRAS.contains(&extra) {
        return Err(JbError::Usage(format!(
            "--with {extra}: no such extra (there are: {})",
            EXTRAS.join(", ")
        )));
    }
    ensure(pyenv, python_dir, variant, false)?;
    if has_extra(pyenv, python_dir, variant, extra) {
        return Ok(false);
    }
    let want = extra_hash(python_dir, variant, extra)?;
    let parent = pyenv.parent().unwrap_or(Path::new("."));
    let _lock = Lock::acquire(&parent.join(".pyenv.lock"))?;
    if has_extra(pyenv, python_dir, variant, extra) {
        return Ok(false);
    }
    let log_path = parent.join(format!("pyenv-setup-{extra}.log"));
    eprintln!(
        "jb: adding the `{extra}` extra to {} from python/requirements-{extra}.txt (log: {})",
        pyenv.display(),
        log_path.display()
    );
    let mut log = std::fs::File::create(&log_path).map_err(|e| JbError::io(&log_path, e))?;
    run_logged(
        Command::new(crate::exec::python::venv_python(pyenv))
            .args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "-q",
                "-r",
            ])
            .arg(python_dir.join(format!("requirements-{extra}.txt")))
            .arg("-c")
            .arg(python_dir.join("requirements-cpu.txt")),
        &mut log,
        &format!("install the `{extra}` extra"),
    )
    .map_err(|e| JbError::PythonEnv(format!("{e} (see {})", log_path.display())))?;
    std::fs::write(extra_stamp(pyenv, extra), &want)
        .map_err(|e| JbError::io(extra_stamp(pyenv, extra), e))?;
    Ok(true)
}
