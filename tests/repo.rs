//! The repository's own project: pipelines, the tune spaces, and `jb eval` on real candidates,
//! including the adversarial ones that crash, hang or exhaust memory (jb survives and says so).

mod common;

use std::process::Command;

use common::{ensure_pyenv, jb_bin, repo_root, Run};

struct Repo {
    cache: tempfile::TempDir,
}

impl Repo {
    fn new() -> Repo {
        Repo {
            cache: tempfile::tempdir().unwrap(),
        }
    }

    fn jb(&self, args: &[&str]) -> Run {
        let pyenv = repo_root().join("cache/pyenv");
        Command::new(jb_bin())
            .arg("--cache-dir")
            .arg(self.cache.path())
            .arg("--pyenv")
            .arg(pyenv)
            .args(args)
            .current_dir(repo_root())
            .output()
            .unwrap()
            .into()
    }
}

#[test]
fn tune_dry_run_counts_are_the_papers() {
    let r = Repo::new().jb(&["--scale", "paper", "--json", "tune", "--dry-run"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = r.json();
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 203);
    let count = |w: &str| {
        rows.iter()
            .filter(|r| r["workload"].as_str().unwrap().starts_with(w))
            .count()
    };
    for (w, n) in [
        ("1p_", 44),
        ("2p_", 24),
        ("3p_", 24),
        ("4p_", 44),
        ("6p_", 4),
        ("7p_", 9),
        ("8p_", 27),
        ("11p_", 27),
    ] {
        assert_eq!(count(w), n, "{w}");
    }
    assert!(rows.iter().all(|r| r["config"].is_object()));
    // Planning the tune needs no Python process: nothing was created in the cache.
    let r = Repo::new().jb(&["--scale", "tiny", "tune", "--dry-run", "8p"]);
    assert!(
        r.stdout.contains("8p_GEMM: 3 configurations"),
        "{}",
        r.stdout
    );
}

#[test]
fn pipelines_expand_over_all_workloads() {
    let r = Repo::new().jb(&["--scale", "cpu", "--json", "list", "steps"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = r.json();
    let ids: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids.iter()
            .filter(|i| i.starts_with("baseline/profile["))
            .count(),
        50
    );
    assert_eq!(
        ids.iter()
            .filter(|i| i.starts_with("baseline/compile["))
            .count(),
        50
    );
    assert!(ids.contains(&"eval/verify[workload=12p_RMSNorm,candidate=rmsnorm_pallas]"));
}

fn eval(repo: &Repo, workload: &str, kernel: &str, extra: &[&str]) -> (i32, serde_json::Value) {
    let mut args = vec![
        "--scale",
        "tiny",
        "--json",
        "eval",
        "--workload",
        workload,
        "--kernel",
        kernel,
    ];
    args.extend_from_slice(extra);
    let r = repo.jb(&args);
    (r.code, r.json())
}

#[test]
fn eval_correct_candidate_and_the_json_contract() {
    ensure_pyenv();
    let repo = Repo::new();
    let (code, v) = eval(
        &repo,
        "12p",
        "candidates/12p_RMSNorm/rmsnorm_pallas.py",
        &[],
    );
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["workload"], "12p_RMSNorm");
    assert_eq!(v["status"], "correct");
    assert!(v["reasons"].as_array().unwrap().is_empty());
    assert!(v["correctness"]["trials"].as_u64().unwrap() >= 6);
    assert!(v["correctness"]["max_abs_err"].is_number());
    assert!(v["baseline"]["median_ms"].as_f64().unwrap() > 0.0);
    assert!(v["baseline"]["samples"].as_u64().unwrap() >= 50);
    assert!(v["kernel"]["median_ms"].as_f64().unwrap() > 0.0);
    assert!(v["speedup_vs_xla"].as_f64().unwrap() > 0.0);
    assert!(v.get("speedup_vs_handtuned").is_some());
    // A second eval is fully cached and gives the same verdict.
    let (code2, v2) = eval(
        &repo,
        "12p_RMSNorm",
        "candidates/12p_RMSNorm/rmsnorm_pallas.py",
        &[],
    );
    assert_eq!(code2, 0);
    assert_eq!(v2["kernel"]["median_ms"], v["kernel"]["median_ms"]);
}

/// The header lines `# target: W` and `# expect: STATUS` of an adversarial candidate.
fn header(path: &std::path::Path) -> (String, String) {
    let text = std::fs::read_to_string(path).unwrap();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("# {name}:")))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("{}: no `# {name}:` header", path.display()))
    };
    (field("target"), field("expect"))
}

/// The candidates that kill, hang or exhaust their worker are handled by jb itself (the Python
/// tests cover the ones detected inside the worker); a null kernel and a pure-JAX one ride along.
#[test]
fn eval_adversarial_candidates_get_their_status() {
    ensure_pyenv();
    let repo = Repo::new();
    let mut seen = 0;
    let mut files: Vec<_> = std::fs::read_dir(repo_root().join("examples/adversarial"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    for path in files {
        if path.extension().and_then(|e| e.to_str()) != Some("py") {
            continue;
        }
        let (target, want) = header(&path);
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        if !(matches!(want.as_str(), "crashed" | "timeout")
            || name == "zeros"
            || name == "no_pallas")
        {
            continue;
        }
        let rel = format!("examples/adversarial/{name}.py");
        let extra: Vec<&str> = match want.as_str() {
            // The step's status is `timeout` wherever the limit falls (starting up or in the
            // busy loop), so a short one tests the same and waits less.
            "timeout" => vec!["--timeout", "10"],
            _ => vec!["--memory-mb", "4000"],
        };
        let (code, v) = eval(&repo, &target, &rel, &extra);
        assert_eq!(code, 1, "{name}: {v:#}");
        assert_eq!(v["status"], want.as_str(), "{name}: {v:#}");
        assert!(
            !v["reasons"].as_array().unwrap().is_empty(),
            "{name}: a reason is given"
        );
        seen += 1;
    }
    assert!(seen >= 5, "only {seen} adversarial candidates ran");
}

#[test]
fn eval_usage_errors() {
    let repo = Repo::new();
    let r = repo.jb(&[
        "eval",
        "--workload",
        "nope",
        "--kernel",
        "candidates/12p_RMSNorm/rmsnorm_pallas.py",
    ]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("unknown workload `nope`"), "{}", r.stderr);
    let r = repo.jb(&["eval", "--workload", "12p", "--kernel", "/no/such/file.py"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("no such file"), "{}", r.stderr);
}

#[test]
fn list_workloads_shows_shapes_and_flops() {
    ensure_pyenv();
    let r = Repo::new().jb(&["--scale", "tiny", "--json", "list", "workloads"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = r.json();
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 50);
    let rms = rows
        .iter()
        .find(|r| r["workload"] == "12p_RMSNorm")
        .unwrap();
    assert!(rms["inputs"].as_array().unwrap().len() >= 2, "{rms:#}");
    assert!(rms["flops"].as_f64().unwrap() > 0.0, "{rms:#}");
    assert_eq!(
        rows.iter()
            .filter(|r| r["meta"]["handtuned"] == true)
            .count(),
        8
    );
    assert_eq!(
        rows.iter()
            .filter(|r| r["meta"]["category"] == "kernelbench")
            .count(),
        33
    );
}

#[test]
fn doctor_prints_fingerprint_and_peaks() {
    ensure_pyenv();
    let r = Repo::new().jb(&["--json", "doctor"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = r.json();
    // The jax the worker runs is the one the pins it reports were built from.
    let reqs = v["pins"]["requirements"].as_str().unwrap();
    let text = std::fs::read_to_string(repo_root().join(reqs)).unwrap();
    let pinned = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("jax=="))
        .unwrap_or_else(|| panic!("{reqs} pins no jax"));
    assert_eq!(v["fingerprint"]["jax"], pinned);
    assert!(
        v["pins"]["id"].as_str().unwrap().starts_with("cpu-py3"),
        "{v:#}"
    );
    if v["pins"]["fallback"] == false {
        assert!(pinned.starts_with("0.12."), "{pinned}");
    }
    assert_eq!(v["fingerprint"]["backend"], "cpu");
    let peak = &v["peak"];
    assert!(
        peak.as_object()
            .unwrap()
            .values()
            .any(|x| x.as_f64().is_some_and(|f| f > 1e9)),
        "{peak:#}"
    );
}
