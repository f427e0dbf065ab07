//! The project: its root folder and the well-known paths inside it.

use std::path::{Path, PathBuf};

use crate::error::{JbError, Result};

#[derive(Debug, Clone)]
pub struct Project {
    pub root: PathBuf,
    pub cache_dir: PathBuf,
    pub python_dir: PathBuf,
    /// The path workers use for the Python environment: `cache/pyenv` of the project (a link
    /// into `cache/pyenvs/`) or the folder `--pyenv` / `JB_PYENV` names.
    pub pyenv_dir: PathBuf,
    pub pyenv: crate::pyenv::Location,
}

impl Project {
    /// Find the project: `explicit` if given, else the nearest ancestor of `start` with `pipelines/`.
    pub fn discover(
        start: &Path,
        explicit: Option<&Path>,
        cache_dir: Option<&Path>,
        pyenv_dir: Option<&Path>,
    ) -> Result<Project> {
        let root = match explicit {
            Some(dir) => {
                let dir = absolute(dir);
                if !dir.join("pipelines").is_dir() {
                    return Err(JbError::NoProject(dir));
                }
                dir
            }
            None => {
                let start = absolute(start);
                start
                    .ancestors()
                    .find(|d| d.join("pipelines").is_dir())
                    .map(Path::to_path_buf)
                    .ok_or(JbError::NoProject(start))?
            }
        };
        let cache_dir = cache_dir
            .map(absolute)
            .unwrap_or_else(|| root.join("cache"));
        // One environment per pin set, shared by every cache dir: under the project's own
        // `cache/`, whatever `--cache-dir` says.
        let pyenv = match pyenv_dir {
            Some(dir) => crate::pyenv::Location::Explicit(absolute(dir)),
            None => crate::pyenv::Location::Shared {
                link: root.join("cache").join("pyenv"),
                root: root.join("cache").join("pyenvs"),
            },
        };
        Ok(Project {
            python_dir: python_source_dir(&root),
            root,
            cache_dir,
            pyenv_dir: pyenv.path().to_path_buf(),
            pyenv,
        })
    }

    pub fn pipelines_dir(&self) -> PathBuf {
        self.root.join("pipelines")
    }

    /// Path relative to the project root, with `/` separators (as used in keys and messages).
    pub fn rel(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .to_string_lossy()
            .replace('\\', "/")
    }
}

/// The Python worker's source: `JB_PYTHON_DIR`, else the project's `python/`, else the one jb
/// was built from.
pub fn python_source_dir(root: &Path) -> PathBuf {
    if let Some(dir) = std::env::var_os("JB_PYTHON_DIR") {
        return PathBuf::from(dir);
    }
    let local = root.join("python").join("jb").join("worker.py");
    if local.is_file() {
        return root.join("python");
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python")
}

pub fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    }
}
