//! Finding the base interpreter jb's Python environment is created with.
//!
//! jb's current pins (jax 0.12) need Python >= 3.12; the fallback pins (jax 0.10.2, in
//! `python/py311/`) run on 3.11. The newest supported interpreter on the machine wins: one named
//! by `JB_BASE_PYTHON`, else the first that answers of `python3.13`, `python3.12`, `python3.11`,
//! `python3` on `PATH` and pyenv's installed versions (`$PYENV_ROOT/versions/*`, default
//! `~/.pyenv`) and the system's `/usr/bin`, `/usr/local/bin`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{JbError, Result};

/// The Python versions jb has pins for, newest first.
pub const SUPPORTED: &[PyVersion] = &[PyVersion(3, 13), PyVersion(3, 12), PyVersion(3, 11)];

/// The oldest Python the current pins support.
pub const CURRENT_MIN: PyVersion = PyVersion(3, 12);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PyVersion(pub u32, pub u32);

impl PyVersion {
    /// `"3.13"`.
    pub fn dotted(self) -> String {
        format!("{}.{}", self.0, self.1)
    }

    /// `"py313"` (as in environment ids).
    pub fn tag(self) -> String {
        format!("py{}{}", self.0, self.1)
    }

    /// Parse `"3.13"` (anything after a second dot is ignored).
    pub fn parse(text: &str) -> Option<PyVersion> {
        let mut it = text.trim().split('.');
        let major = it.next()?.parse().ok()?;
        let minor = it.next()?.parse().ok()?;
        Some(PyVersion(major, minor))
    }

    /// Parse the `py313` tag of an environment id.
    pub fn from_tag(tag: &str) -> Option<PyVersion> {
        let digits = tag.strip_prefix("py")?;
        if digits.len() < 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let (major, minor) = digits.split_at(1);
        Some(PyVersion(major.parse().ok()?, minor.parse().ok()?))
    }

    pub fn is_current(self) -> bool {
        self >= CURRENT_MIN
    }
}

/// A base interpreter and its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interpreter {
    pub path: PathBuf,
    pub version: PyVersion,
}

/// The version of the interpreter at `path`, or None when it does not run (a pyenv shim for a
/// version that is not selected answers with an error).
pub fn probe(path: &Path) -> Option<PyVersion> {
    let out = Command::new(path)
        .args([
            "-c",
            "import sys, venv; print('%d.%d' % sys.version_info[:2])",
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    PyVersion::parse(&String::from_utf8_lossy(&out.stdout))
}

/// Where to look, in order (duplicates are probed once).
fn candidates() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let names = ["python3.13", "python3.12", "python3.11", "python3"];
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            for name in names {
                let p = dir.join(name);
                if p.is_file() {
                    out.push(p);
                }
            }
        }
    }
    let pyenv_root = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")));
    if let Some(root) = pyenv_root {
        if let Ok(entries) = std::fs::read_dir(root.join("versions")) {
            let mut versions: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path().join("bin").join("python3"))
                .filter(|p| p.is_file())
                .collect();
            versions.sort();
            out.extend(versions.into_iter().rev());
        }
    }
    for dir in ["/usr/local/bin", "/usr/bin"] {
        for name in names {
            let p = Path::new(dir).join(name);
            if p.is_file() {
                out.push(p);
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|p| seen.insert(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())));
    out
}

/// Pick the newest supported version among probed candidates (the first found of a version wins).
pub fn pick(found: impl IntoIterator<Item = (PathBuf, Option<PyVersion>)>) -> Option<Interpreter> {
    let mut best: Option<Interpreter> = None;
    for (path, version) in found {
        let Some(version) = version.filter(|v| SUPPORTED.contains(v)) else {
            continue;
        };
        if best.as_ref().is_none_or(|b| version > b.version) {
            best = Some(Interpreter { path, version });
        }
    }
    best
}

/// The interpreter to create the environment with.
pub fn discover() -> Result<Interpreter> {
    if let Some(p) = std::env::var_os("JB_BASE_PYTHON") {
        let path = PathBuf::from(p);
        let version = probe(&path).ok_or_else(|| {
            JbError::PythonEnv(format!(
                "JB_BASE_PYTHON={} does not run as a Python interpreter with venv",
                path.display()
            ))
        })?;
        if !SUPPORTED.contains(&version) {
            return Err(JbError::PythonEnv(format!(
                "JB_BASE_PYTHON={} is Python {}; jb has pins for {}",
                path.display(),
                version.dotted(),
                supported_list()
            )));
        }
        return Ok(Interpreter { path, version });
    }
    let probed: Vec<(PathBuf, Option<PyVersion>)> = candidates()
        .into_iter()
        .map(|p| {
            let v = probe(&p);
            (p, v)
        })
        .collect();
    pick(probed.clone()).ok_or_else(|| {
        let seen: Vec<String> = probed
            .iter()
            .map(|(p, v)| match v {
                Some(v) => format!("{} ({})", p.display(), v.dotted()),
                None => format!("{} (does not run)", p.display()),
            })
            .collect();
        JbError::PythonEnv(format!(
            "no Python interpreter jb has pins for ({}) was found; looked at: {}. Install one, or name it with JB_BASE_PYTHON",
            supported_list(),
            if seen.is_empty() { "nothing".to_string() } else { seen.join(", ") }
        ))
    })
}

fn supported_list() -> String {
    SUPPORTED
        .iter()
        .map(|v| v.dotted())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_supported_version_wins() {
        let found = vec![
            (PathBuf::from("/a/python3"), Some(PyVersion(3, 11))),
            (PathBuf::from("/b/python3.12"), Some(PyVersion(3, 12))),
            (PathBuf::from("/c/python3.13"), None),
            (PathBuf::from("/d/python3.13"), Some(PyVersion(3, 13))),
            (PathBuf::from("/e/python3.13"), Some(PyVersion(3, 13))),
            (PathBuf::from("/f/python3.14"), Some(PyVersion(3, 14))),
            (PathBuf::from("/g/python3.9"), Some(PyVersion(3, 9))),
        ];
        let got = pick(found).unwrap();
        assert_eq!(got.path, PathBuf::from("/d/python3.13"));
        assert_eq!(got.version, PyVersion(3, 13));
        assert!(got.version.is_current());
    }

    #[test]
    fn only_311_falls_back() {
        let got = pick(vec![(PathBuf::from("/a"), Some(PyVersion(3, 11)))]).unwrap();
        assert!(!got.version.is_current());
        assert!(pick(vec![(PathBuf::from("/a"), Some(PyVersion(3, 10)))]).is_none());
    }

    #[test]
    fn versions_parse_and_tag() {
        assert_eq!(PyVersion::parse("3.13\n"), Some(PyVersion(3, 13)));
        assert_eq!(PyVersion::parse("3.12.1"), Some(PyVersion(3, 12)));
        assert_eq!(PyVersion::parse("x"), None);
        assert_eq!(PyVersion(3, 13).tag(), "py313");
        assert_eq!(PyVersion::from_tag("py313"), Some(PyVersion(3, 13)));
        assert_eq!(PyVersion::from_tag("py3"), None);
        assert_eq!(PyVersion::from_tag("cpu"), None);
    }
}
