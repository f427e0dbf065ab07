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

/// Every message kind of every boundary (worker, Ray driver, export index) crosses both languages
/// unchanged: Rust's samples through `python -m jb.contract roundtrip`, Python's samples through
/// `jb::contract::roundtrip`; and a message of another version is refused on each side.
#[test]
fn contract_messages_round_trip_through_both_languages() {
    use std::io::Write;
    let root = common::repo_root();
    common::ensure_pyenv();
    let python = root.join("cache/pyenv/bin/python");
    let run = |args: &[&str], input: &str| -> String {
        let mut child = Command::new(&python)
            .args(["-m", "jb.contract"])
            .args(args)
            .current_dir(&root)
            .env("PYTHONPATH", root.join("python"))
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("run python -m jb.contract");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "python -m jb.contract {args:?} failed"
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let kinds = |items: &[serde_json::Value]| {
        let mut k: Vec<String> = items
            .iter()
            .map(|i| i["kind"].as_str().unwrap().to_string())
            .collect();
        k.sort();
        k.dedup();
        k
    };

    // Rust -> Python -> Rust.
    let ours = jb::contract::samples();
    let input: String = ours.iter().map(|s| format!("{s}\n")).collect();
    let back: Vec<serde_json::Value> = run(&["roundtrip"], &input)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(back.len(), ours.len());
    for (sent, got) in ours.iter().zip(&back) {
        assert_eq!(got.get("error"), None, "python refused {sent}");
        assert_eq!(got["message"], sent["message"], "python changed {sent}");
    }

    // Python -> Rust.
    let theirs: Vec<serde_json::Value> = run(&["samples"], "")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        kinds(&theirs),
        kinds(&ours),
        "both sides know the same kinds"
    );
    for s in &theirs {
        let kind = s["kind"].as_str().unwrap();
        let again = jb::contract::roundtrip(kind, s["message"].clone())
            .unwrap_or_else(|e| panic!("rust refused python's {kind}: {e}"));
        assert_eq!(again, s["message"], "rust changed python's {kind}");
    }

    // Another version, on each side.
    let mut old = theirs
        .iter()
        .find(|s| s["kind"] == "worker_ready")
        .unwrap()
        .clone();
    old["message"]["protocol"] = serde_json::json!(1);
    let rust = jb::contract::roundtrip("worker_ready", old["message"].clone()).unwrap_err();
    assert!(rust.contains("protocol 1"), "{rust}");
    let py: serde_json::Value =
        serde_json::from_str(run(&["roundtrip"], &format!("{old}\n")).trim()).unwrap();
    assert!(py["error"].as_str().unwrap().contains("protocol 1"), "{py}");
}
