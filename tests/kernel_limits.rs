//! The limits the kernel enforces around a sandboxed process (issue 20 item 3), tried directly:
//! a process started the way jb starts a sandboxed worker ([`Sandbox::command`] with a
//! [`Jail`], spawned by [`spawn_tied_keeping`]) that fills memory is killed by its control group
//! and the result says so; a process flood stops at `pids.max`; a write past the sized scratch
//! mount fails; a denied system call fails under the seccomp filter and works without it.
//!
//! Each test skips, saying why, where the host has no writable cgroup hierarchy, no bubblewrap
//! that can start a sandbox, or cannot mount a tmpfs (CI containers often lack all three).

use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

use jb::exec::child::spawn_tied_keeping;
use jb::exec::sandbox::{Jail, Sandbox};
use jb::exec::StepOutput;

/// The scratch limit every test here runs under (read by `Jail::start`).
const SCRATCH_MB: u64 = 16;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn set_scratch_limit() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| std::env::set_var("JB_SANDBOX_SCRATCH_MB", SCRATCH_MB.to_string()));
}

/// A sandbox for this repository, or why there is none here.
fn sandbox(cache: &Path) -> Result<Sandbox, String> {
    set_scratch_limit();
    let root = repo_root();
    let sb = Sandbox::new(
        &root,
        &root.join("python"),
        &root.join("cache/pyenv"),
        cache,
    )
    .map_err(|e| e.to_string())?;
    sb.probe().map_err(|e| e.to_string())?;
    Ok(sb)
}

/// A sandbox and a scratch folder with the kernel's limits around it (`memory_mb` for the
/// group), or `None` after printing why the test is skipped. `need` are the limits the test
/// relies on.
fn jailed(memory_mb: u64, need: &[&str]) -> Option<(Sandbox, tempfile::TempDir, Jail)> {
    let cache = tempfile::tempdir().unwrap();
    let sb = match sandbox(cache.path()) {
        Ok(sb) => sb,
        Err(why) => {
            eprintln!("skipped: no usable sandbox here: {why}");
            return None;
        }
    };
    let scratch = tempfile::Builder::new()
        .prefix("jb-kernel-limits-")
        .tempdir()
        .unwrap();
    let jail = Jail::start(&sb, scratch.path(), Some(memory_mb));
    for n in need {
        if let Some((_, why)) = jail.missing.iter().find(|(m, _)| m == n) {
            eprintln!("skipped: {n} cannot be enforced here: {why}");
            return None;
        }
    }
    Some((sb, scratch, jail))
}

/// Start `sh -c script` inside the sandbox, under `jail` when given.
fn start(sb: &Sandbox, scratch: &Path, jail: Option<&Jail>, script: &str) -> Child {
    let mut cmd = sb.command(
        scratch,
        scratch,
        &[],
        Path::new("/bin/sh"),
        &["-c", script],
        jail,
    );
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    spawn_tied_keeping(cmd, jail.and_then(Jail::keep_fd)).expect("start the sandboxed shell")
}

/// Wait at most `limit` for `child`; `None` if it is still running.
fn wait_for(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if let Some(st) = child.try_wait().unwrap() {
            return Some(st);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

fn output(mut child: Child, limit: Duration) -> (ExitStatus, String) {
    let st = wait_for(&mut child, limit);
    if st.is_none() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (
        st.unwrap_or_else(|| panic!("still running after {limit:?}: {text}")),
        text,
    )
}

fn hit(jail: &Jail) -> Vec<String> {
    jail.json()["hit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn memory_past_the_limit_is_killed_and_reported() {
    let Some((sb, scratch, jail)) = jailed(96, &["cgroup_memory", "sized_tmpfs"]) else {
        return;
    };
    // tmpfs pages: the sandbox's /tmp is 2 GiB, so only the group's 96 MiB stops this; jb's
    // own RSS polling would not see it (no process maps these pages).
    let child = start(
        &sb,
        scratch.path(),
        Some(&jail),
        "head -c 400M /dev/zero > /tmp/fill; echo wrote=$?",
    );
    let (st, text) = output(child, Duration::from_secs(60));
    let g = jail.group.as_ref().unwrap();
    assert!(
        g.memory_peak() <= 96 << 20,
        "peak {} over the limit",
        g.memory_peak()
    );
    assert!(
        !text.contains("wrote=0"),
        "400 MiB written under a 96 MiB group: {st} {text}"
    );
    assert_eq!(hit(&jail), ["memory"], "{st} {text} {}", jail.json());
    // What the step's result says of it.
    let mut out = StepOutput::new("crashed", serde_json::json!({"reasons": ["worker died"]}));
    jail.annotate(&mut out, &Default::default());
    let reasons = out.result["reasons"].as_array().unwrap();
    assert!(
        reasons[0]
            .as_str()
            .unwrap()
            .contains("stopped by the kernel at its memory limit of 96 MiB"),
        "{}",
        out.result
    );
    assert_eq!(out.result["kernel_limits"]["memory_mb"], 96);
}

#[test]
fn memory_under_the_limit_is_not_reported() {
    let Some((sb, scratch, jail)) = jailed(256, &["cgroup_memory"]) else {
        return;
    };
    let child = start(
        &sb,
        scratch.path(),
        Some(&jail),
        "head -c 32M /dev/zero > /tmp/fill && echo wrote=$?",
    );
    let (st, text) = output(child, Duration::from_secs(60));
    assert!(st.success() && text.contains("wrote=0"), "{st} {text}");
    assert!(hit(&jail).is_empty(), "{}", jail.json());
    let mut out = StepOutput::new("crashed", serde_json::json!({"reasons": ["worker died"]}));
    jail.annotate(&mut out, &Default::default());
    assert_eq!(out.result["reasons"][0], "worker died");
}

#[test]
fn a_process_flood_stops_at_pids_max() {
    let Some((sb, scratch, jail)) = jailed(512, &["cgroup_pids"]) else {
        return;
    };
    let max = jail.json()["pids_max"].as_u64().unwrap();
    // Twice the limit of processes that stay alive; a refused fork ends the loop.
    let script = format!(
        "i=0; while [ $i -lt {} ]; do sleep 60 & i=$((i+1)); done; echo started=$i; exit 0",
        2 * max
    );
    let mut child = start(&sb, scratch.path(), Some(&jail), &script);
    let g = jail.group.as_ref().unwrap();
    let t0 = Instant::now();
    while !g.hit_pids_limit() && t0.elapsed() < Duration::from_secs(60) {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let live = g.pids().len() as u64;
    assert!(live <= max, "{live} processes in a group of pids.max {max}");
    assert!(g.hit_pids_limit(), "no fork refused; {live} live");
    assert_eq!(hit(&jail), ["pids"], "{}", jail.json());
    g.kill_all();
    let _ = wait_for(&mut child, Duration::from_secs(10));
    let _ = child.kill();
    let _ = child.wait();
    assert!(g.pids().is_empty(), "left behind: {:?}", g.pids());
}

#[test]
fn a_write_past_the_scratch_size_fails() {
    let Some((sb, scratch, jail)) = jailed(512, &["sized_scratch"]) else {
        return;
    };
    let big = scratch.path().join("big");
    // An unlinked file held open counts as well: first 12 MiB of it, then 12 MiB visible;
    // then it waits, the hidden file still open, as a worker does until its answer is taken.
    let script = format!(
        "exec 3>{dir}/hidden; rm {dir}/hidden; head -c 12M /dev/zero >&3; \
         head -c 12M /dev/zero > {big}; echo wrote=$?; sleep 30",
        dir = scratch.path().display(),
        big = big.display()
    );
    let mut child = start(&sb, scratch.path(), Some(&jail), &script);
    let mut text = String::new();
    {
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap());
        while !text.contains("wrote=") {
            let mut l = String::new();
            if lines.read_line(&mut l).unwrap() == 0 {
                break;
            }
            text.push_str(&l);
        }
    }
    // What `Jail::take_products` looks at, at the answer: the mount is full now.
    assert!(
        jail.check_scratch(),
        "scratch not full while running: {text}"
    );
    if let Some(g) = &jail.group {
        g.kill_all();
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    assert!(
        !text.contains("wrote=0"),
        "24 MiB fit in {SCRATCH_MB} MiB: {text}"
    );
    assert!(
        text.contains("No space left on device"),
        "not refused for space: {text}"
    );
    let len = std::fs::metadata(&big).map(|m| m.len()).unwrap_or(0);
    assert!(len < SCRATCH_MB << 20, "{len} bytes written");
    assert_eq!(hit(&jail), ["scratch"], "{}", jail.json());
    // A step that failed of it is reported as stopped at the limit, what it said kept.
    let mut out = StepOutput::new(
        "compile_error",
        serde_json::json!({"reasons": ["OSError: [Errno 28] No space left on device"]}),
    );
    jail.annotate(&mut out, &Default::default());
    assert_eq!(out.status, "crashed");
    assert!(out.infra);
    let why = out.result["reasons"][0].as_str().unwrap();
    assert!(
        why.contains("sandbox scratch folder") && why.contains("reported compile_error"),
        "{why}"
    );
    // A rejection stays a rejection.
    let mut out = StepOutput::new("rejected", serde_json::json!({"reasons": ["forged"]}));
    jail.annotate(&mut out, &Default::default());
    assert_eq!(out.status, "rejected");
    assert_eq!(out.result["reasons"][0], "forged");
    drop(jail);
    // Unmounted: the folder is the host's again and empty.
    assert!(!big.exists());
}

#[test]
fn seccomp_denies_unshare_inside_the_sandbox() {
    let Some((sb, scratch, jail)) = jailed(512, &["seccomp"]) else {
        return;
    };
    if !Path::new("/usr/bin/unshare").is_file() {
        eprintln!("skipped: no /usr/bin/unshare here");
        return;
    }
    let script = "/usr/bin/unshare --user /bin/true && echo nested=ok";
    // Without the filter (the control), a nested user namespace can be made here; else skip.
    let (_, text) = output(
        start(&sb, scratch.path(), None, script),
        Duration::from_secs(30),
    );
    if !text.contains("nested=ok") {
        eprintln!("skipped: no nested user namespace even without the filter: {text}");
        return;
    }
    let (st, text) = output(
        start(&sb, scratch.path(), Some(&jail), script),
        Duration::from_secs(30),
    );
    assert!(!st.success() && !text.contains("nested=ok"), "{st} {text}");
    assert!(text.contains("Operation not permitted"), "{text}");
}
