//! Building command pipelines with the real binary: incrementality, early cutoff, crash safety,
//! concurrency and corruption.

mod common;

use std::time::{Duration, Instant};

use common::TestProject;

/// N chains of 3 steps plus an aggregate, as in the benchmark of the core issue.
fn chains(n: usize, sleep: &str) -> TestProject {
    let p = TestProject::new();
    for i in 0..n {
        p.write(&format!("src/in{i}.txt"), &format!("value {i}\n"));
    }
    p.write(
        "pipelines/chains.yaml",
        &format!(
            r#"description: chains of three steps and an aggregate
steps:
  a:
    kind: command
    foreach: [{{match: "src/in{{n}}.txt"}}]
    inputs: ["src/in{{n}}.txt"]
    outputs: ["out/a{{n}}.txt"]
    run: "{sleep}tr a-z A-Z < src/in{{n}}.txt > out/a{{n}}.txt"
  b:
    kind: command
    foreach: [{{match: "src/in{{n}}.txt"}}]
    needs: [a]
    inputs: ["out/a{{n}}.txt"]
    outputs: ["out/b{{n}}.txt"]
    run: "{sleep}cut -c1-5 out/a{{n}}.txt > out/b{{n}}.txt"
  c:
    kind: command
    foreach: [{{match: "src/in{{n}}.txt"}}]
    needs: [b]
    outputs: ["out/c{{n}}.txt"]
    run: "{sleep}rev < out/b{{n}}.txt > out/c{{n}}.txt"
  total:
    kind: command
    needs: [c]
    outputs: ["out/total.txt"]
    run: "cat out/c*.txt | sort | uniq -c | wc -l > out/total.txt"
"#
        ),
    );
    p
}

fn ran(r: &common::Run) -> Vec<String> {
    let v = r.json();
    let mut out: Vec<String> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["cached"] == false)
        .map(|s| s["step"].as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

#[test]
fn cold_noop_and_one_change_reruns_exactly_its_chain() {
    let p = chains(5, "");
    let r = p.jb(&["build", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(ran(&r).len(), 16);
    assert_eq!(p.read("out/total.txt").trim(), "1");

    let r = p.jb(&["build", "--json"]);
    assert_eq!(r.code, 0);
    assert!(ran(&r).is_empty(), "no-op build ran {:?}", ran(&r));

    // A change that alters the chain's outputs reruns the chain and the aggregate.
    p.write("src/in3.txt", "other 3\n");
    let r = p.jb(&["build", "--json"]);
    assert_eq!(
        ran(&r),
        [
            "chains/a[n=3]",
            "chains/b[n=3]",
            "chains/c[n=3]",
            "chains/total"
        ]
    );

    // A change whose effect disappears downstream stops where the output is byte-identical:
    // `b` keeps the first 5 characters only.
    p.write("src/in3.txt", "other 3 but longer\n");
    let r = p.jb(&["build", "--json"]);
    assert_eq!(ran(&r), ["chains/a[n=3]", "chains/b[n=3]"]);
}

#[test]
fn dry_run_and_explain_say_why() {
    let p = chains(2, "");
    assert_eq!(p.jb(&["build"]).code, 0);
    p.write("src/in1.txt", "changed\n");
    let r = p.jb(&["build", "--dry-run"]);
    assert_eq!(r.code, 0);
    assert!(
        r.stdout
            .contains("run    chains/a[n=1]  (input file src/in1.txt changed"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("run    chains/b[n=1]  (upstream chains/a[n=1] will run)"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("cached chains/a[n=0]"), "{}", r.stdout);
    assert!(
        !p.read("out/a1.txt").contains("CHANGED"),
        "dry run must not execute"
    );
    let r = p.jb(&["explain", "chains/a[n=1]", "chains/a[n=0]"]);
    assert!(
        r.stdout
            .contains("chains/a[n=1]: would run: input file src/in1.txt changed"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("chains/a[n=0]: up to date"),
        "{}",
        r.stdout
    );
    let r = p.jb(&["explain", "chains/total", "--json"]);
    assert_eq!(r.json()[0]["reason"], "upstream chains/c[n=1] will run");
}

#[test]
fn deleted_output_is_restored_from_the_cache() {
    let p = chains(1, "");
    assert_eq!(p.jb(&["build"]).code, 0);
    std::fs::remove_file(p.path().join("out/b0.txt")).unwrap();
    let r = p.jb(&["build", "--json"]);
    assert!(ran(&r).is_empty());
    assert_eq!(p.read("out/b0.txt"), "VALUE\n");
}

#[test]
fn failure_exit_code_and_keep_going() {
    let p = TestProject::new();
    p.write(
        "pipelines/f.yaml",
        "steps:\n  bad:\n    kind: command\n    run: \"echo to stdout; echo why it failed >&2; exit 3\"\n  after:\n    kind: command\n    needs: [bad]\n    run: echo never\n  other:\n    kind: command\n    run: sleep 0.2\n",
    );
    let r = p.jb(&["build", "-j", "1", "--json"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let r = p.jb(&["build", "-k", "--json"]);
    assert_eq!(r.code, 1);
    let v = r.json();
    let status = |id: &str| {
        v["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["step"] == id)
            .map(|s| s["status"].clone())
    };
    assert_eq!(status("f/bad").unwrap(), "failed");
    let bad = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "f/bad")
        .unwrap();
    assert_eq!(bad["result"]["stderr_tail"], "why it failed", "{bad}");
    assert_eq!(status("f/after").unwrap(), "skipped");
    assert_eq!(status("f/other").unwrap(), "ok");
}

#[test]
fn timeout_is_recorded_and_not_cached() {
    let p = TestProject::new();
    p.write(
        "pipelines/t.yaml",
        "steps:\n  slow:\n    kind: command\n    timeout: 0.3\n    run: sleep 30 && touch finished\n",
    );
    let r = p.jb(&["build", "--json"]);
    assert_eq!(r.code, 1);
    // Killed at its limit, not waited for: the command never got past its sleep.
    assert!(!p.path().join("finished").exists());
    assert_eq!(r.json()["steps"][0]["status"], "timeout");
    let r = p.jb(&["build", "--dry-run"]);
    assert!(
        r.stdout.contains("run    t/slow"),
        "infrastructure failures are not cached: {}",
        r.stdout
    );
}

#[test]
fn kill_dash_nine_mid_run_then_rerun_completes() {
    let p = chains(6, "sleep 0.25; ");
    let mut child = p
        .command(&["build", "-j", "2"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until a few steps finished, then kill jb without warning.
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let done = (0..6)
            .filter(|i| p.path().join(format!("out/b{i}.txt")).exists())
            .count();
        if done >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let r = p.jb(&["build", "--json"]);
    assert_eq!(r.code, 0, "rerun after kill -9: {}", r.stderr);
    let v = r.json();
    let cached = v["cached"].as_u64().unwrap();
    assert!(cached >= 2, "finished steps were kept: cached {cached}");
    assert_eq!(p.read("out/total.txt").trim(), "1");
    // And the cache is consistent afterwards.
    let r = p.jb(&["build", "--json"]);
    assert!(ran(&r).is_empty());
}

#[test]
fn two_concurrent_builds_on_one_cache_both_succeed() {
    let p = chains(8, "sleep 0.05; ");
    let a = p
        .command(&["build", "-j", "2", "--json"])
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let b = p
        .command(&["build", "-j", "2", "--json"])
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (ra, rb): (common::Run, common::Run) = (
        a.wait_with_output().unwrap().into(),
        b.wait_with_output().unwrap().into(),
    );
    assert_eq!(ra.code, 0, "first: {}", ra.stderr);
    assert_eq!(rb.code, 0, "second: {}", rb.stderr);
    assert_eq!(p.read("out/total.txt").trim(), "1");
    let r = p.jb(&["build", "--json"]);
    assert!(ran(&r).is_empty());
}

#[test]
fn corrupted_blob_is_detected_and_recomputed() {
    let p = chains(1, "");
    assert_eq!(p.jb(&["build"]).code, 0);
    // Corrupt every blob in the store.
    let mut corrupted = 0;
    for d in std::fs::read_dir(p.path().join("cache/cas"))
        .unwrap()
        .flatten()
    {
        for f in std::fs::read_dir(d.path()).unwrap().flatten() {
            let mut bytes = std::fs::read(f.path()).unwrap();
            bytes[0] ^= 0x20;
            std::fs::write(f.path(), bytes).unwrap();
            corrupted += 1;
        }
    }
    assert!(corrupted >= 4);
    std::fs::remove_file(p.path().join("out/c0.txt")).unwrap();
    let r = p.jb(&["build", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("corrupt blob"), "{}", r.stderr);
    assert_eq!(
        ran(&r).len(),
        4,
        "every step whose blob was corrupt ran again"
    );
    assert_eq!(p.read("out/c0.txt").trim(), "EULAV");
    let r = p.jb(&["build", "--json"]);
    assert!(ran(&r).is_empty());
}

#[test]
fn cache_stats_gc_clean() {
    let p = chains(2, "");
    assert_eq!(p.jb(&["build"]).code, 0);
    p.write("src/in0.txt", "new\n");
    assert_eq!(p.jb(&["build"]).code, 0);
    let r = p.jb(&["cache", "stats", "--json"]);
    let before = r.json()["tables"]["actions"].as_i64().unwrap();
    let r = p.jb(&["cache", "gc"]);
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("dropped"), "{}", r.stdout);
    let after = p.jb(&["cache", "stats", "--json"]).json()["tables"]["actions"]
        .as_i64()
        .unwrap();
    assert!(
        after < before,
        "gc dropped superseded records ({before} -> {after})"
    );
    let r = p.jb(&["build", "--json"]);
    assert!(ran(&r).is_empty(), "gc keeps what the current build uses");
    assert_eq!(p.jb(&["cache", "clean"]).code, 0);
    let r = p.jb(&["build", "--json"]);
    assert_eq!(ran(&r).len(), 7);
}

#[test]
fn list_and_graph() {
    let p = chains(2, "");
    let r = p.jb(&["list", "steps"]);
    assert_eq!(r.stdout.lines().count(), 7);
    let r = p.jb(&["graph", "--format", "dot", "chains/total"]);
    assert!(r.stdout.starts_with("digraph jb {"));
    assert_eq!(r.stdout.matches(" -> ").count(), 6);
    let r = p.jb(&["graph", "--format", "mermaid"]);
    assert!(r.stdout.starts_with("flowchart LR"));
    assert!(r.stdout.contains("-->"));
}

#[test]
fn ctrl_c_stops_cleanly_and_keeps_finished_results() {
    let p = chains(6, "sleep 0.3; ");
    let child = p
        .command(&["build", "-j", "2", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline && !p.path().join("out/a1.txt").exists() {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let r: common::Run = child.wait_with_output().unwrap().into();
    assert_eq!(r.code, 3, "interrupted build exits 3: {}", r.stderr);
    assert!(r.stderr.contains("interrupted"), "{}", r.stderr);
    let v = r.json();
    assert_eq!(v["interrupted"], true);
    let finished = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["status"] == "ok")
        .count();
    assert!(finished >= 1);
    let r = p.jb(&["build", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.json()["cached"].as_u64().unwrap() >= finished as u64,
        "finished results were kept"
    );
}

#[test]
fn pipeline_option_restricts_targets() {
    let p = chains(2, "");
    p.write("pipelines/extra.yaml", "default: false\nsteps:\n  x:\n    kind: command\n    foreach: [{match: \"src/in{n}.txt\"}]\n    run: \"true\"\n");
    let r = p.jb(&["build", "--dry-run", "--json", "-p", "chains"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json().as_array().unwrap().len(), 7);
    // A non-default pipeline is reachable by name, and its instances by `-p` plus a step id glob.
    let r = p.jb(&["build", "--dry-run", "--json", "extra"]);
    assert_eq!(r.json().as_array().unwrap().len(), 2);
    let r = p.jb(&["build", "--dry-run", "--json"]);
    assert_eq!(
        r.json().as_array().unwrap().len(),
        7,
        "`all` leaves non-default pipelines out"
    );
    let r = p.jb(&["build", "-p", "nope"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("no such pipeline"), "{}", r.stderr);
}
