//! The Python test suite (workloads, harness, baselines), run with the Python environment that
//! jb itself sets up from the pinned requirements.

mod common;

use std::process::Command;

#[test]
fn python_suite_passes() {
    let root = common::repo_root();
    common::ensure_pyenv();
    let python = root.join("cache/pyenv/bin/python");
    let workers = if std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        > 1
    {
        "2"
    } else {
        "0"
    };
    let out = Command::new(&python)
        .args([
            "-m",
            "pytest",
            "python/tests",
            "-q",
            "-p",
            "no:cacheprovider",
            "-n",
            workers,
            "--durations=15",
        ])
        .current_dir(&root)
        .env("PYTHONPATH", root.join("python"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run pytest");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Show pytest's summary in the cargo test output either way.
    let tail: Vec<&str> = stdout
        .lines()
        .rev()
        .take(60)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    println!("{}", tail.join("\n"));
    assert!(out.status.success(), "pytest failed:\n{stdout}\n{stderr}");
}
