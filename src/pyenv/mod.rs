//! The Python environment jb creates for its workers from pinned requirements.
//!
//! One environment per pin set ([`pins::PinSet::id`]: variant, interpreter version, the files'
//! hash), created under the project's `cache/pyenvs/<id>/` and shared by every cache dir;
//! `cache/pyenv` is a link to the one in use (what the README's commands and the tests name).
//! `--pyenv DIR` / `JB_PYENV` names an environment folder of the user's instead.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{JbError, Result};

pub mod interpreter;
pub mod pins;

pub use interpreter::{Interpreter, PyVersion};
pub use pins::PinSet;

/// Which requirements file: `cpu`, `gpu` or `tpu`; without a backend, what the machine has
/// ([`crate::device::detect`]).
pub fn variant_for_backend(backend: Option<&str>) -> &'static str {
    match backend {
        Some("gpu") => "gpu",
        Some("tpu") => "tpu",
        Some(_) => "cpu",
        None => match crate::device::detect::accelerator() {
            Some(crate::device::Platform::Gpu) => "gpu",
            Some(crate::device::Platform::Tpu) => "tpu",
            _ => "cpu",
        },
    }
}

/// Where an environment lives: the shared, id-named folders behind the project's `cache/pyenv`
/// link, or one folder the user named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// `link` (`<project>/cache/pyenv`) points at `root/<id>` (`<project>/cache/pyenvs`).
    Shared { link: PathBuf, root: PathBuf },
    /// `--pyenv DIR` / `JB_PYENV`: the environment is this folder.
    Explicit(PathBuf),
}

impl Location {
    /// The path workers use (the link, or the explicit folder).
    pub fn path(&self) -> &Path {
        match self {
            Location::Shared { link, .. } => link,
            Location::Explicit(dir) => dir,
        }
    }
}

/// What [`ensure`] found or made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ensured {
    /// The pin set's id (`cpu-py313-<hash>`).
    pub id: String,
    /// The folder it is in (the link's target for a shared environment).
    pub dir: PathBuf,
    /// Whether it had to install.
    pub installed: bool,
    /// The interpreter version, and whether these are the fallback (3.11) pins.
    pub version: PyVersion,
}

impl Ensured {
    pub fn is_fallback(&self) -> bool {
        !self.version.is_current()
    }
}

fn stamp_path(pyenv: &Path) -> PathBuf {
    pyenv.join(".jb-pins")
}

/// The pin-set id the environment was built from, if it is complete.
pub fn installed_pins(pyenv: &Path) -> Option<String> {
    let python = crate::exec::python::venv_python(pyenv);
    if !python.exists() {
        return None;
    }
    std::fs::read_to_string(stamp_path(pyenv))
        .ok()
        .map(|s| s.trim().to_string())
}

/// The id of the complete environment at `pyenv` when it matches the current pins of `variant`
/// for its own interpreter; no interpreter is probed and nothing is installed. What every command
/// checks before it starts a worker.
pub fn ready(pyenv: &Path, python_dir: &Path, variant: &'static str) -> Result<Option<String>> {
    let Some(have) = installed_pins(pyenv) else {
        return Ok(None);
    };
    let Some((have_variant, version)) = pins::parse_id(&have) else {
        return Ok(None);
    };
    if have_variant != variant || !interpreter::SUPPORTED.contains(&version) {
        return Ok(None);
    }
    let want = PinSet::new(python_dir, variant, version).id()?;
    Ok((want == have).then_some(have))
}

struct Lock(std::fs::File);

impl Lock {
    /// Take the lock file at `path` (its folder is created first: a ready environment can live
    /// where no lock was ever taken, e.g. an old-layout `cache/pyenv`).
    fn acquire(path: &Path) -> Result<Lock> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| JbError::io(parent, e))?;
        }
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

fn lock_dir(location: &Location) -> PathBuf {
    match location {
        Location::Shared { root, .. } => root.clone(),
        Location::Explicit(dir) => dir.parent().unwrap_or(Path::new(".")).to_path_buf(),
    }
}

fn ensured(id: String, dir: PathBuf, installed: bool) -> Result<Ensured> {
    let version = pins::parse_id(&id)
        .map(|(_, v)| v)
        .ok_or_else(|| JbError::PythonEnv(format!("malformed environment id {id}")))?;
    Ok(Ensured {
        id,
        dir,
        installed,
        version,
    })
}

/// Make sure the environment at `location` matches the pins of `variant`; create or update it if
/// not (`force`: reinstall anyway).
pub fn ensure(
    location: &Location,
    python_dir: &Path,
    variant: &'static str,
    force: bool,
) -> Result<Ensured> {
    let path = location.path();
    if !force {
        if let Some(id) = ready(path, python_dir, variant)? {
            return ensured(
                id,
                std::fs::canonicalize(path).unwrap_or(path.into()),
                false,
            );
        }
    }
    let locks = lock_dir(location);
    std::fs::create_dir_all(&locks).map_err(|e| JbError::io(&locks, e))?;
    let _lock = Lock::acquire(&locks.join(".pyenv.lock"))?;
    // Another jb may have finished it while we waited.
    if !force {
        if let Some(id) = ready(path, python_dir, variant)? {
            return ensured(
                id,
                std::fs::canonicalize(path).unwrap_or(path.into()),
                false,
            );
        }
    }
    match location {
        Location::Shared { link, root } => {
            let base = interpreter::discover()?;
            let set = PinSet::new(python_dir, variant, base.version);
            let id = set.id()?;
            let dir = root.join(&id);
            let complete = installed_pins(&dir).as_deref() == Some(id.as_str());
            if force || !complete {
                install(&dir, &base.path, &set, &id, &root.join(format!("{id}.log")))?;
            }
            point_link(link, root, &id)?;
            ensured(id, dir, force || !complete)
        }
        Location::Explicit(dir) => {
            // An existing environment keeps its interpreter; a new one gets the newest there is.
            let python = crate::exec::python::venv_python(dir);
            let (base, version) =
                match interpreter::probe(&python).filter(|v| interpreter::SUPPORTED.contains(v)) {
                    Some(v) if python.exists() => (python.clone(), v),
                    _ => {
                        let b = interpreter::discover()?;
                        (b.path, b.version)
                    }
                };
            let set = PinSet::new(python_dir, variant, version);
            let id = set.id()?;
            let log = dir
                .parent()
                .unwrap_or(Path::new("."))
                .join("pyenv-setup.log");
            install(dir, &base, &set, &id, &log)?;
            ensured(id, dir.clone(), true)
        }
    }
}

/// Point `link` at `root/<id>` (atomically: a new link renamed over the old one). An old-layout
/// environment folder in the link's place is removed (it is rebuilt under `root`).
fn point_link(link: &Path, root: &Path, id: &str) -> Result<()> {
    let target = match (root.parent(), link.parent()) {
        (Some(a), Some(b)) if a == b => {
            PathBuf::from(root.file_name().unwrap_or_default()).join(id)
        }
        _ => root.join(id),
    };
    if std::fs::read_link(link).ok().as_deref() == Some(target.as_path()) {
        return Ok(());
    }
    if let Ok(meta) = std::fs::symlink_metadata(link) {
        if meta.is_dir() {
            std::fs::remove_dir_all(link).map_err(|e| JbError::io(link, e))?;
        }
    }
    let tmp = link.with_extension(format!("link-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&target, &tmp).map_err(|e| JbError::io(&tmp, e))?;
    std::fs::rename(&tmp, link).map_err(|e| JbError::io(link, e))?;
    Ok(())
}

fn install(dir: &Path, base: &Path, set: &PinSet, id: &str, log_path: &Path) -> Result<()> {
    if let Some(parent) = log_path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| JbError::io(parent, e))?;
    }
    eprintln!(
        "jb: setting up the Python environment {} (Python {}{}) from {} (first use; about a minute; log: {})",
        dir.display(),
        set.version.dotted(),
        if set.is_fallback() {
            ", with the fallback pins for Python 3.11: jax 0.10.2"
        } else {
            ""
        },
        set.file.display(),
        log_path.display()
    );
    let mut log = std::fs::File::create(log_path).map_err(|e| JbError::io(log_path, e))?;
    let _ = std::fs::remove_file(stamp_path(dir));
    let python = crate::exec::python::venv_python(dir);
    if !python.exists() {
        run_logged(
            Command::new(base).arg("-m").arg("venv").arg(dir),
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
            .arg(&set.file),
        &mut log,
        "install the pinned requirements",
    )
    .map_err(|e| JbError::PythonEnv(format!("{e} (see {})", log_path.display())))?;
    std::fs::write(stamp_path(dir), id).map_err(|e| JbError::io(stamp_path(dir), e))?;
    let _ = writeln!(log, "pins {id} installed");
    Ok(())
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

fn extra_hash(python_dir: &Path, base_id: &str, extra: &str) -> Result<String> {
    let file = python_dir.join(format!("requirements-{extra}.txt"));
    let text = std::fs::read_to_string(&file).map_err(|e| JbError::io(&file, e))?;
    Ok(format!(
        "{base_id}+{extra}-{}",
        &blake3::hash(text.as_bytes()).to_hex()[..16]
    ))
}

/// Whether an optional extra is installed (in the current version of its pins).
pub fn has_extra(pyenv: &Path, python_dir: &Path, variant: &'static str, extra: &str) -> bool {
    let Ok(Some(base)) = ready(pyenv, python_dir, variant) else {
        return false;
    };
    let Ok(want) = extra_hash(python_dir, &base, extra) else {
        return false;
    };
    std::fs::read_to_string(extra_stamp(pyenv, extra)).is_ok_and(|s| s.trim() == want)
}

/// Install an optional extra (e.g. `ray`) into the environment, constrained by the base pins so
/// that nothing the fingerprint records changes. Returns true when it had to install.
pub fn ensure_extra(
    location: &Location,
    python_dir: &Path,
    variant: &'static str,
    extra: &str,
) -> Result<bool> {
    if !EXTRAS.contains(&extra) {
        return Err(JbError::Usage(format!(
            "--with {extra}: no such extra (there are: {})",
            EXTRAS.join(", ")
        )));
    }
    let base = ensure(location, python_dir, variant, false)?;
    let pyenv = location.path();
    if has_extra(pyenv, python_dir, variant, extra) {
        return Ok(false);
    }
    let want = extra_hash(python_dir, &base.id, extra)?;
    let locks = lock_dir(location);
    let _lock = Lock::acquire(&locks.join(".pyenv.lock"))?;
    if has_extra(pyenv, python_dir, variant, extra) {
        return Ok(false);
    }
    let log_path = locks.join(format!("pyenv-setup-{extra}.log"));
    eprintln!(
        "jb: adding the `{extra}` extra to {} from python/requirements-{extra}.txt (log: {})",
        pyenv.display(),
        log_path.display()
    );
    let constraints = PinSet::new(python_dir, "cpu", base.version).file;
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
            .arg(constraints),
        &mut log,
        &format!("install the `{extra}` extra"),
    )
    .map_err(|e| JbError::PythonEnv(format!("{e} (see {})", log_path.display())))?;
    std::fs::write(extra_stamp(pyenv, extra), &want)
        .map_err(|e| JbError::io(extra_stamp(pyenv, extra), e))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_in_a_folder_that_does_not_exist_yet_creates_it() {
        // CI's clean checkout: a ready environment, no cache/pyenvs folder, then `--with ray`.
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("cache/pyenvs/.pyenv.lock");
        let lock = Lock::acquire(&path).unwrap();
        assert!(path.is_file());
        drop(lock);
    }

    #[test]
    fn the_link_is_relative_when_it_sits_beside_the_root_and_replaces_an_old_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let (link, root) = (tmp.path().join("pyenv"), tmp.path().join("pyenvs"));
        std::fs::create_dir_all(root.join("cpu-py313-aaaa")).unwrap();
        std::fs::create_dir_all(link.join("bin")).unwrap(); // an old-layout environment
        point_link(&link, &root, "cpu-py313-aaaa").unwrap();
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            PathBuf::from("pyenvs/cpu-py313-aaaa")
        );
        std::fs::create_dir_all(root.join("cpu-py313-bbbb")).unwrap();
        point_link(&link, &root, "cpu-py313-bbbb").unwrap();
        assert_eq!(
            std::fs::canonicalize(&link).unwrap(),
            std::fs::canonicalize(root.join("cpu-py313-bbbb")).unwrap()
        );
    }

    #[test]
    fn ready_needs_the_stamp_of_the_current_pins() {
        let tmp = tempfile::tempdir().unwrap();
        let python_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python");
        let env = tmp.path().join("env");
        std::fs::create_dir_all(env.join("bin")).unwrap();
        std::fs::write(env.join("bin/python"), "").unwrap();
        assert_eq!(ready(&env, &python_dir, "cpu").unwrap(), None);
        let id = PinSet::new(&python_dir, "cpu", PyVersion(3, 13))
            .id()
            .unwrap();
        std::fs::write(stamp_path(&env), &id).unwrap();
        assert_eq!(ready(&env, &python_dir, "cpu").unwrap(), Some(id.clone()));
        assert_eq!(ready(&env, &python_dir, "gpu").unwrap(), None);
        std::fs::write(stamp_path(&env), id.replace("cpu-py313-", "cpu-py313-0")).unwrap();
        assert_eq!(ready(&env, &python_dir, "cpu").unwrap(), None);
    }
}
