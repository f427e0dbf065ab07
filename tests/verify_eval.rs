//! `jb eval` on the repository's workloads: secret seeds (different per evaluation, recorded,
//! replayed with `--seed`, stable keys so a cached verdict is reused) and the evaluation's status
//! as the worst of its stages (a profile `rejected` fails the evaluation).

mod common;

use std::process::Command;

use common::{ensure_pyenv, jb_bin, repo_root, Run};

fn eval(cache: &std::path::Path, kernel: &str, extra: &[&str]) -> (i32, serde_json::Value) {
    let mut args = vec![
        "--scale",
        "tiny",
        "--json",
        "eval",
        "--workload",
        "12p",
        "--kernel",
        kernel,
    ];
    args.extend_from_slice(extra);
    let r: Run = Command::new(jb_bin())
        .arg("--cache-dir")
        .arg(cache)
        .arg("--pyenv")
        .arg(repo_root().join("cache/pyenv"))
        .args(&args)
        .current_dir(repo_root())
        .output()
        .unwrap()
        .into();
    (r.code, r.json())
}

fn trial_seeds(v: &serde_json::Value) -> Vec<u64> {
    v["correctness"]["per_trial"]
        .as_array()
        .unwrap_or_else(|| panic!("no per_trial: {v:#}"))
        .iter()
        .map(|t| t["seed"].as_u64().unwrap())
        .collect()
}

const KERNEL: &str = "candidates/12p_RMSNorm/rmsnorm_pallas.py";

#[test]
fn eval_seeds_are_secret_recorded_cached_and_replayable() {
    ensure_pyenv();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (code, first) = eval(a.path(), KERNEL, &[]);
    assert_eq!(code, 0, "{first:#}");
    let seed = first["correctness"]["seed"]
        .as_u64()
        .expect("the seed is revealed");
    let seeds = trial_seeds(&first);
    assert!(seeds.len() >= 6 && !seeds.contains(&1));
    // The same evaluation again: the cached verdict, with the seeds it was drawn with.
    let (_, cached) = eval(a.path(), KERNEL, &[]);
    assert_eq!(cached["verify"]["cached"], true, "{cached:#}");
    assert_eq!(trial_seeds(&cached), seeds);
    // A fresh cache draws fresh seeds.
    let (_, other) = eval(b.path(), KERNEL, &[]);
    assert_ne!(other["correctness"]["seed"].as_u64(), Some(seed));
    assert!(trial_seeds(&other).iter().all(|s| !seeds.contains(s)));
    // `--seed` replays the first evaluation's inputs exactly.
    let (code, replay) = eval(b.path(), KERNEL, &["--seed", &seed.to_string()]);
    assert_eq!(code, 0, "{replay:#}");
    assert_eq!(replay["correctness"]["seed"].as_u64(), Some(seed));
    assert_eq!(trial_seeds(&replay), seeds);
    assert_eq!(
        replay["correctness"]["max_abs_err"],
        first["correctness"]["max_abs_err"]
    );
}

#[test]
fn eval_a_kernel_rejected_while_profiled_fails() {
    ensure_pyenv();
    let cache = tempfile::tempdir().unwrap();
    let (code, v) = eval(
        cache.path(),
        "python/tests/fixtures/candidates/tamper_when_profiled.py",
        &[],
    );
    assert_eq!(v["verify"]["status"], "correct", "{v:#}");
    // Not exportable (TPU interpret mode): every stage imported it, in the sandbox.
    assert_eq!(v["trust"], "sandboxed", "{v:#}");
    assert_eq!(v["status"], "rejected", "{v:#}");
    assert_eq!(code, 1, "{v:#}");
    let reasons = v["reasons"].as_array().unwrap();
    assert!(
        reasons
            .iter()
            .any(|r| r.as_str().is_some_and(|s| s.starts_with("profile: "))),
        "{v:#}"
    );
    assert!(v["kernel"].is_null() && v["speedup_vs_xla"].is_null());
}

#[test]
fn a_verdict_forged_inside_the_sandbox_does_not_survive_the_judges_recheck() {
    ensure_pyenv();
    let cache = tempfile::tempdir().unwrap();
    let (code, v) = eval(
        cache.path(),
        "examples/adversarial/trust_sandboxed_forgery.py",
        &[],
    );
    // It chose the sandboxed path (not exportable) and poisoned the in-process comparison: the
    // verify op in its process said `correct`; the judge, from its dumped outputs, did not.
    assert_eq!(v["trust"], "sandboxed", "{v:#}");
    assert_eq!(v["verify"]["claimed_status"], "correct", "{v:#}");
    assert_eq!(v["verify"]["recheck"]["status"], "incorrect", "{v:#}");
    assert_eq!(v["status"], "incorrect", "{v:#}");
    assert_eq!(code, 1, "{v:#}");

    // An honest kernel on the same path keeps its verdict, and the dumped outputs are not kept.
    let (code, v) = eval(
        cache.path(),
        "python/tests/fixtures/candidates/prng_rmsnorm.py",
        &[],
    );
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["trust"], "sandboxed", "{v:#}");
    assert_eq!(v["verify"]["recheck"]["status"], "correct", "{v:#}");
    let kept_outputs = walk(cache.path())
        .into_iter()
        .filter(|p| p.components().any(|c| c.as_os_str() == "outputs"))
        .count();
    assert_eq!(kept_outputs, 0);
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}
