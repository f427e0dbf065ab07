//! A test builder that writes a project into a temp dir and runs the real `jb` binary in it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub struct TestProject {
    pub dir: tempfile::TempDir,
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

pub fn jb_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_jb"))
}

/// The repository's own root (for tests that use the real workloads and Python environment).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

impl TestProject {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("pipelines")).unwrap();
        TestProject { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, rel: &str, content: &str) -> &Self {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
        self
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(jb_bin());
        c.args(args)
            .current_dir(self.path())
            .env_remove("JB_CACHE_DIR")
            .env_remove("JB_DIAGNOSTICS")
            .env("NO_COLOR", "1");
        c
    }

    pub fn jb(&self, args: &[&str]) -> Run {
        self.command(args).output().expect("run jb").into()
    }
}

/// `jb setup [extra]` on the repository's own Python environment (idempotent, locked): what the
/// tests that run real workloads need first.
pub fn setup_repo_pyenv(extra: &[&str]) {
    let out = Command::new(jb_bin())
        .arg("setup")
        .args(extra)
        .current_dir(repo_root())
        .env_remove("JB_CACHE_DIR")
        .env_remove("JB_PYENV")
        .output()
        .expect("run jb setup");
    assert!(
        out.status.success(),
        "jb setup {}: {}",
        extra.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The repository's Python environment, created once.
pub fn ensure_pyenv() {
    setup_repo_pyenv(&[]);
}
