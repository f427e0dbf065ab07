//! The attacks of issue 20 on the sandbox's limits, as candidate files through `jb eval`
//! (examples/adversarial/trust_{index_rewrite,leftovers,shm,fallocate}.py): a claim rewritten
//! after the answer is never read, what the sandbox leaves is discarded and counted (not
//! cached), shared memory and a reservation past the scratch quota are bounded by the kernel.

mod common;

use std::path::Path;
use std::process::Command;

use common::{ensure_pyenv, jb_bin, repo_root, Run};
use serde_json::Value;

/// `jb --scale tiny eval --workload 12p --kernel examples/adversarial/<file>` in `cache`.
fn eval(file: &str, cache: &Path) -> Run {
    ensure_pyenv();
    let root = repo_root();
    let pyenv = root.join("cache/pyenv");
    Command::new(jb_bin())
        .current_dir(&root)
        .args(["--scale", "tiny", "--json", "--cache-dir"])
        .arg(cache)
        .arg("--pyenv")
        .arg(&pyenv)
        .args([
            "eval",
            "--workload",
            "12p",
            "--memory-mb",
            "1500",
            "--kernel",
        ])
        .arg(format!("examples/adversarial/{file}"))
        .output()
        .unwrap()
        .into()
}

/// Which of the sandbox's limits the kernel cannot enforce on this host.
fn missing_limits() -> Vec<String> {
    let root = repo_root();
    let cache = tempfile::tempdir().unwrap();
    let Ok(sb) = jb::exec::sandbox::Sandbox::new(
        &root,
        &root.join("python"),
        &root.join("cache/pyenv"),
        cache.path(),
    ) else {
        return vec!["sandbox".into()];
    };
    let scratch = tempfile::tempdir().unwrap();
    let jail = jb::exec::sandbox::Jail::start(&sb, scratch.path(), Some(1500));
    jail.missing.iter().map(|(n, _)| n.to_string()).collect()
}

/// The bytes of the regular files under `path` (links not followed).
fn du(path: &Path) -> u64 {
    let Ok(meta) = path.symlink_metadata() else {
        return 0;
    };
    if meta.is_dir() {
        std::fs::read_dir(path)
            .map(|d| d.flatten().map(|e| du(&e.path())).sum())
            .unwrap_or(0)
    } else {
        meta.len()
    }
}

#[test]
fn a_pallas_claim_rewritten_after_the_answer_is_never_read() {
    let cache = tempfile::tempdir().unwrap();
    let r = eval("trust_index_rewrite.py", cache.path());
    let v = r.json();
    assert_eq!(v["status"], "rejected", "{}\n{}", r.stdout, r.stderr);
    let reasons = v["reasons"].to_string();
    assert!(reasons.contains("no pallas_call"), "{reasons}");
}

#[test]
fn what_the_sandbox_leaves_is_discarded_and_counted_not_cached() {
    let cache = tempfile::tempdir().unwrap();
    let r = eval("trust_leftovers.py", cache.path());
    assert_eq!(r.json()["status"], "correct", "{}\n{}", r.stdout, r.stderr);
    // 64 MiB and 5000 files were left in the export's folder: none of it is in the cache.
    let size = du(cache.path());
    assert!(size < 32 << 20, "the cache holds {size} bytes");
    let db = rusqlite::Connection::open(cache.path().join("jb.sqlite")).unwrap();
    let result: String = db
        .query_row(
            "SELECT result FROM actions WHERE step_id LIKE '%/export[%'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    let result: Value = serde_json::from_str(&result).unwrap();
    assert!(
        result["discarded_files"].as_u64().unwrap() >= 5000,
        "{result}"
    );
    assert!(
        result["discarded_bytes"].as_u64().unwrap() >= 64 << 20,
        "{result}"
    );
}

#[test]
fn shared_memory_is_bounded_by_the_kernel() {
    let missing = missing_limits();
    if missing.iter().any(|m| m == "sized_tmpfs" || m == "sandbox") {
        eprintln!("skipped: this host cannot size the sandbox's tmpfs mounts: {missing:?}");
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let r = eval("trust_shm.py", cache.path());
    let v = r.json();
    // Refused by the sized mount (the import fails) or killed at the memory limit: never a
    // candidate that held 4 GiB and was judged.
    let status = v["status"].as_str().unwrap_or("?");
    assert!(
        status == "compile_error" || status == "crashed",
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    let text = v.to_string();
    assert!(
        text.contains("No space left on device") || text.contains("memory limit"),
        "{text}"
    );
}

#[test]
fn a_reservation_past_the_scratch_quota_is_refused_by_the_kernel() {
    let missing = missing_limits();
    if missing
        .iter()
        .any(|m| m == "sized_scratch" || m == "sandbox")
    {
        eprintln!("skipped: this host cannot mount a sized scratch folder: {missing:?}");
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let r = eval("trust_fallocate.py", cache.path());
    let v = r.json();
    assert_eq!(v["status"], "compile_error", "{}\n{}", r.stdout, r.stderr);
    assert!(
        v.to_string().contains("No space left on device"),
        "{}",
        r.stdout
    );
}
