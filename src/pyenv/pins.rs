//! Which pinned requirements an environment is built from, and the id that names it.
//!
//! `python/requirements-<variant>.txt` are the current pins (Python >= 3.12); the fallback for a
//! machine with only Python 3.11 is `python/py311/requirements-<variant>.txt`. An environment's id,
//! `<variant>-py<XY>-<hash>`, hashes the files (and every file they include with `-r`) and the
//! interpreter's version: one environment per id, shared by every cache dir.

use std::path::{Path, PathBuf};

use super::interpreter::PyVersion;
use crate::error::{JbError, Result};

/// A requirements file for a variant and an interpreter version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinSet {
    pub variant: &'static str,
    pub version: PyVersion,
    pub file: PathBuf,
}

impl PinSet {
    pub fn new(python_dir: &Path, variant: &'static str, version: PyVersion) -> PinSet {
        let dir = if version.is_current() {
            python_dir.to_path_buf()
        } else {
            python_dir.join("py311")
        };
        PinSet {
            variant,
            version,
            file: dir.join(format!("requirements-{variant}.txt")),
        }
    }

    /// The CPU pins of the same interpreter (constraints for optional extras).
    pub fn cpu(&self, python_dir: &Path) -> PinSet {
        PinSet::new(python_dir, "cpu", self.version)
    }

    /// Whether these are the fallback (jax 0.10.2) pins.
    pub fn is_fallback(&self) -> bool {
        !self.version.is_current()
    }

    /// `<variant>-py<XY>-<hash16>`.
    pub fn id(&self) -> Result<String> {
        let mut h = blake3::Hasher::new();
        h.update(self.version.dotted().as_bytes());
        h.update(b"\0");
        let mut todo = vec![self.file.clone()];
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
        Ok(format!(
            "{}-{}-{}",
            self.variant,
            self.version.tag(),
            &h.finalize().to_hex()[..16]
        ))
    }
}

/// The parts of an environment id: (variant, version).
pub fn parse_id(id: &str) -> Option<(&str, PyVersion)> {
    let mut it = id.splitn(3, '-');
    let variant = it.next()?;
    let version = PyVersion::from_tag(it.next()?)?;
    it.next()?;
    Some((variant, version))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn python_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python")
    }

    #[test]
    fn current_and_fallback_pins_are_different_files_and_ids() {
        let cur = PinSet::new(&python_dir(), "cpu", PyVersion(3, 13));
        let old = PinSet::new(&python_dir(), "cpu", PyVersion(3, 11));
        assert!(cur.file.ends_with("python/requirements-cpu.txt"));
        assert!(old.file.ends_with("python/py311/requirements-cpu.txt"));
        assert!(!cur.is_fallback() && old.is_fallback());
        let (a, b) = (cur.id().unwrap(), old.id().unwrap());
        assert!(
            a.starts_with("cpu-py313-") && b.starts_with("cpu-py311-"),
            "{a} {b}"
        );
        assert_eq!(parse_id(&a), Some(("cpu", PyVersion(3, 13))));
        // The same file for another interpreter is another environment.
        let other = PinSet::new(&python_dir(), "cpu", PyVersion(3, 12))
            .id()
            .unwrap();
        assert_ne!(a[10..], other[10..]);
    }

    #[test]
    fn every_variant_has_both_pin_sets() {
        for variant in ["cpu", "gpu", "tpu"] {
            for v in [PyVersion(3, 13), PyVersion(3, 11)] {
                let set = PinSet::new(&python_dir(), variant, v);
                set.id()
                    .unwrap_or_else(|e| panic!("{}: {e}", set.file.display()));
            }
        }
    }

    #[test]
    fn the_current_pins_are_jax_0_12_and_the_fallback_0_10() {
        let cur = std::fs::read_to_string(python_dir().join("requirements-cpu.txt")).unwrap();
        let old = std::fs::read_to_string(python_dir().join("py311/requirements-cpu.txt")).unwrap();
        assert!(
            cur.lines().any(|l| l.trim().starts_with("jax==0.12.")),
            "{cur}"
        );
        assert!(cur.lines().any(|l| l.trim() == "tokamax==0.0.17"));
        assert!(old.lines().any(|l| l.trim() == "jax==0.10.2"));
        // Every line of the current pins is exact (no ranges): what setup installs is what was tested.
        for l in cur.lines().map(str::trim) {
            if l.is_empty() || l.starts_with('#') || l.starts_with("-r ") {
                continue;
            }
            assert!(
                l.contains("==") && !l.contains('>') && !l.contains('<'),
                "{l}"
            );
        }
        let tpu = std::fs::read_to_string(python_dir().join("requirements-tpu.txt")).unwrap();
        assert!(
            tpu.lines().any(|l| l.trim().starts_with("libtpu==")),
            "{tpu}"
        );
        let tpu_old =
            std::fs::read_to_string(python_dir().join("py311/requirements-tpu.txt")).unwrap();
        assert!(
            tpu_old
                .lines()
                .any(|l| l.trim().starts_with("libtpu==0.0.42")),
            "{tpu_old}"
        );
    }
}
