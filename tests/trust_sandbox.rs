//! The OS sandbox around candidate code, tried as an attacker would: a candidate that writes
//! outside its scratch folder, reads the cache, connects to a loopback listener, reads a planted
//! secret and leaves a daemon behind gets none of it done. Signals: SIGTERM/SIGKILL to jb leave
//! no worker behind. Each test runs the real binary on a small project in a temp dir (one
//! workload copied from the repository, the repository's Python sources and environment).

mod common;

use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{ensure_pyenv, jb_bin, repo_root, Run};
use serde_json::Value;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.file_name().is_some_and(|n| n == "__pycache__") {
            continue;
        }
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// A project with workload 12p, its cache in `cache/` under the project (the default layout,
/// which the sandbox must hide), and one pipeline running `step_kind` on `candidate.py`.
struct Proj {
    dir: tempfile::TempDir,
    /// A unique word for the processes this test's candidate starts.
    marker: String,
}

const WORKLOAD: &str = "12p_RMSNorm";

impl Proj {
    fn new(candidate: &str) -> Proj {
        ensure_pyenv();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        copy_dir(
            &repo_root().join("workloads").join(WORKLOAD),
            &root.join("workloads").join(WORKLOAD),
        );
        std::fs::create_dir_all(root.join("pipelines")).unwrap();
        std::fs::copy(
            repo_root().join("pipelines/baseline.yaml"),
            root.join("pipelines/baseline.yaml"),
        )
        .unwrap();
        std::fs::write(
            root.join("pipelines/attack.yaml"),
            format!(
                "default: false\nsteps:\n  compile:\n    kind: compile\n    foreach: [{{values: {{workload: [{WORKLOAD}]}}}}]\n    params:\n      workload: \"workloads/{{workload}}\"\n      impl: {{kind: candidate, path: candidate.py}}\n    timeout: 300\n"
            ),
        )
        .unwrap();
        std::fs::write(root.join("candidate.py"), candidate).unwrap();
        let marker = format!(
            "jbmarker{}x{}",
            std::process::id(),
            root.file_name().unwrap().to_string_lossy().replace('.', "")
        );
        Proj { dir, marker }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn cache(&self) -> PathBuf {
        self.root().join("cache")
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(jb_bin());
        c.arg("--pyenv")
            .arg(repo_root().join("cache/pyenv"))
            .args(["--scale", "tiny", "--backend", "cpu"])
            .args(args)
            .current_dir(self.root())
            .env_remove("JB_CACHE_DIR")
            .env_remove("JB_NO_SANDBOX")
            .env("JB_PYTHON_DIR", repo_root().join("python"))
            .env("NO_COLOR", "1");
        c
    }

    fn jb(&self, args: &[&str]) -> Run {
        self.command(args).output().expect("run jb").into()
    }

    /// Processes whose command line mentions this test's marker or project folder, once the
    /// kernel has had a moment to finish what jb killed (a SIGKILLed process tree on a busy
    /// machine is not gone the instant jb exits; one that survives 10 s was not killed).
    fn leftovers(&self) -> Vec<String> {
        let root = self.root().to_string_lossy().to_string();
        let mut found = processes_matching(&[&self.marker, &root]);
        for _ in 0..100 {
            if found.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
            found = processes_matching(&[&self.marker, &root]);
        }
        found
    }
}

fn processes_matching(needles: &[&str]) -> Vec<String> {
    let me = std::process::id().to_string();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.chars().all(|c| c.is_ascii_digit()) || name == me {
            continue;
        }
        let Ok(raw) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&raw).replace('\0', " ");
        // Zombies have an empty command line and hold nothing.
        if needles.iter().any(|n| cmd.contains(n)) {
            out.push(format!("{name}: {cmd}"));
        }
    }
    out
}

/// Poll until `f` holds. The decision is `f`'s; the only bound is a hang guard (far beyond any
/// honest wait on a busy machine), so a slow machine never fails a test, a hung one still ends.
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    const HANG_GUARD: Duration = Duration::from_secs(900);
    let t0 = Instant::now();
    while !f() {
        if t0.elapsed() > HANG_GUARD {
            panic!("{what} never happened (hung: gave up after {HANG_GUARD:?})");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn step<'a>(summary: &'a Value, prefix: &str) -> &'a Value {
    summary["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"].as_str().unwrap().starts_with(prefix))
        .unwrap_or_else(|| panic!("no step {prefix} in {summary}"))
}

/// The attack: at import time it tries everything, reports what it got on stderr (one
/// `JBATTACK {json}` line, which comes back in the step's `stderr_tail`), then defines a
/// harmless `workload`.
fn attack_candidate(p: &Proj, port: u16, python_probe: &Path) -> String {
    let cfg = serde_json::json!({
        "project": p.root(),
        "cache": p.cache(),
        "probe": python_probe,
        "port": port,
        "marker": p.marker,
        "daemon_file": p.root().join("daemon_was_here"),
    })
    .to_string();
    format!(
        r#"
import json, os, socket, sys, time
CFG = json.loads({cfg:?})
report = {{}}

def attempt(name, fn):
    try:
        value = fn()
        report[name] = {{"done": True, "value": value}}
    except BaseException as exc:
        report[name] = {{"done": False, "error": type(exc).__name__ + ": " + str(exc)[:120]}}

def write(path, data=b"pwned"):
    with open(path, "ab") as f:
        f.write(data)

attempt("write_project", lambda: write(os.path.join(CFG["project"], "PWNED")))
attempt("write_workload", lambda: write(os.path.join(CFG["project"], "workloads", "{WORKLOAD}", "workload.py"), b"\n# pwned\n"))
attempt("write_cache", lambda: write(os.path.join(CFG["cache"], "PWNED")))
attempt("write_db", lambda: write(os.path.join(CFG["cache"], "jb.sqlite"), b"garbage-from-candidate"))
attempt("write_python", lambda: write(CFG["probe"]))
attempt("list_cache", lambda: sorted(os.listdir(CFG["cache"])))
attempt("read_db", lambda: len(open(os.path.join(CFG["cache"], "jb.sqlite"), "rb").read()))
attempt("connect", lambda: socket.create_connection(("127.0.0.1", CFG["port"]), timeout=3).close())
report["env_secret"] = os.environ.get("OPENAI_API_KEY")
report["env_names"] = sorted(os.environ)
report["sandboxed"] = os.environ.get("JB_SANDBOXED")
fds = {{}}
for fd in os.listdir("/proc/self/fd"):
    try:
        fds[fd] = os.readlink("/proc/self/fd/" + fd)
    except OSError:
        pass
report["fds"] = fds

def daemon():
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            code = "import sys, time; time.sleep(20); open(sys.argv[1], 'w').write('alive')"
            os.execv(sys.executable, [sys.executable, "-c", code, CFG["daemon_file"], CFG["marker"]])
        os._exit(0)
    os.waitpid(pid, 0)
attempt("daemon", daemon)
print("JBATTACK " + json.dumps(report), file=sys.stderr, flush=True)

import jax.numpy as jnp

def workload(x, w):
    return x * w
"#
    )
}

#[test]
fn sandbox_blocks_writes_reads_network_secrets_and_daemons() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    // A file the candidate tries to create in the worker's Python sources (the repository's).
    let probe = repo_root()
        .join("python")
        .join(format!("jb_attack_probe_{}.py", std::process::id()));
    let p = Proj::new("");
    std::fs::write(
        p.root().join("candidate.py"),
        attack_candidate(&p, port, &probe),
    )
    .unwrap();
    // The cache exists before the candidate runs (the database is there to be attacked).
    let r = p.jb(&["--json", "list", "steps"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r: Run = p
        .command(&["--json", "build", "attack"])
        .env("OPENAI_API_KEY", "secret-planted")
        .output()
        .unwrap()
        .into();
    let probe_written = probe.exists();
    let _ = std::fs::remove_file(&probe);
    let leftovers = p.leftovers();
    assert!(
        r.stdout.contains("JBATTACK"),
        "the attack did not run (code {}):\n{}\n{}",
        r.code,
        r.stdout,
        r.stderr
    );
    assert!(!r.stdout.contains("secret-planted"), "{}", r.stdout);
    let summary = r.json();
    let compile = step(&summary, "attack/compile");
    assert_eq!(compile["result"]["trust"], "sandboxed", "{compile}");
    let tail = compile["result"]["stderr_tail"].as_str().unwrap();
    let line = tail
        .lines()
        .find_map(|l| l.split_once("JBATTACK ").map(|(_, j)| j))
        .unwrap();
    let report: Value = serde_json::from_str(line).unwrap();
    // (a) writing outside scratch: the project, a workload, the cache, the database, the
    // worker's sources.
    for w in [
        "write_project",
        "write_workload",
        "write_cache",
        "write_db",
        "write_python",
    ] {
        assert_eq!(report[w]["done"], false, "{w}: {}", report[w]);
    }
    assert!(!p.root().join("PWNED").exists());
    assert!(!p.cache().join("PWNED").exists());
    assert!(!probe_written, "the candidate wrote into python/");
    assert!(!p.read_workload().contains("pwned"));
    let db = std::fs::read(p.cache().join("jb.sqlite")).unwrap();
    assert!(!db
        .windows(b"garbage-from-candidate".len())
        .any(|w| w == b"garbage-from-candidate"));
    // (b) reading the cache: nothing of it is there, not even an inherited descriptor.
    let cache = p.cache().to_string_lossy().to_string();
    for (fd, target) in report["fds"].as_object().unwrap() {
        assert!(
            !target.as_str().unwrap().contains(&cache),
            "fd {fd} -> {target}"
        );
    }
    assert_eq!(report["read_db"]["done"], false, "{}", report["read_db"]);
    let listing = &report["list_cache"];
    assert!(
        listing["done"] == false || listing["value"] == serde_json::json!([]),
        "the candidate saw the cache: {listing}"
    );
    // (c) the network: no connection reached the listener.
    assert_eq!(report["connect"]["done"], false, "{}", report["connect"]);
    match listener.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("the candidate connected to the loopback listener: {other:?}"),
    }
    // (d) the environment: emptied.
    assert_eq!(report["env_secret"], Value::Null);
    assert_eq!(report["sandboxed"], "1");
    assert!(
        !report["env_names"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "OPENAI_API_KEY"),
        "{}",
        report["env_names"]
    );
    // (e) surviving the step: the double-forked setsid daemon died with its sandbox.
    assert!(leftovers.is_empty(), "left behind: {leftovers:?}");
    std::thread::sleep(Duration::from_secs(1));
    assert!(!p.root().join("daemon_was_here").exists());
}

impl Proj {
    fn read_workload(&self) -> String {
        std::fs::read_to_string(
            self.root()
                .join("workloads")
                .join(WORKLOAD)
                .join("workload.py"),
        )
        .unwrap()
    }
}

const BENIGN: &str = "import jax.numpy as jnp\n\ndef workload(x, w):\n    return x * w\n";

#[test]
fn without_a_sandbox_candidates_are_refused_unless_no_sandbox() {
    let p = Proj::new(BENIGN);
    let r: Run = p
        .command(&["--json", "build", "attack"])
        .env("JB_BWRAP", "/nonexistent/bwrap")
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let summary = r.json();
    let compile = step(&summary, "attack/compile");
    assert_eq!(compile["status"], "error", "{compile}");
    let why = compile["result"]["reasons"][0].as_str().unwrap();
    assert!(why.contains("--no-sandbox"), "{why}");
    assert!(why.contains("/nonexistent/bwrap"), "{why}");
    // jb eval refuses before building anything.
    let r: Run = p
        .command(&[
            "--json",
            "eval",
            "--workload",
            WORKLOAD,
            "--kernel",
            "candidate.py",
        ])
        .env("JB_BWRAP", "/nonexistent/bwrap")
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 3, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("--no-sandbox"), "{}", r.stderr);
    // With --no-sandbox it runs, and says so.
    let r: Run = p
        .command(&["--json", "--no-sandbox", "build", "attack"])
        .env("JB_BWRAP", "/nonexistent/bwrap")
        .output()
        .unwrap()
        .into();
    let summary = r.json();
    let compile = step(&summary, "attack/compile");
    assert_eq!(compile["status"], "ok", "{compile}\n{}", r.stderr);
    assert_eq!(compile["result"]["trust"], "unsandboxed");
    // A sandboxed build does not take the unsandboxed result from the cache.
    let r = p.jb(&["--json", "build", "attack"]);
    let summary = r.json();
    let compile = step(&summary, "attack/compile");
    assert_eq!(compile["cached"], false, "{compile}");
    assert_eq!(compile["result"]["trust"], "sandboxed", "{compile}");
}

/// A candidate that starts a marked child and then hangs at import.
fn hanging_candidate(marker: &str) -> String {
    format!(
        "import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', '{marker}'])\ntime.sleep(300)\n"
    )
}

fn start_and_wait_for_candidate(p: &Proj, args: &[&str]) -> Child {
    let child = p
        .command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the candidate's child", || {
        !processes_matching(&[&p.marker]).is_empty()
    });
    child
}

fn signal(child: &Child, sig: i32) {
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

#[test]
fn sigterm_to_build_cancels_the_step_and_kills_the_workers() {
    let p = Proj::new("");
    std::fs::write(p.root().join("candidate.py"), hanging_candidate(&p.marker)).unwrap();
    let child = start_and_wait_for_candidate(&p, &["--json", "build", "attack"]);
    signal(&child, libc::SIGTERM);
    let r: Run = child.wait_with_output().unwrap().into();
    assert_eq!(r.code, 3, "{}\n{}", r.stdout, r.stderr);
    let summary = r.json();
    assert_eq!(summary["interrupted"], true);
    let compile = step(&summary, "attack/compile");
    assert_eq!(compile["status"], "cancelled", "{compile}");
    let left = p.leftovers();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn sighup_to_eval_interrupts_it_and_kills_the_workers() {
    let p = Proj::new("");
    std::fs::write(p.root().join("candidate.py"), hanging_candidate(&p.marker)).unwrap();
    let child = start_and_wait_for_candidate(
        &p,
        &[
            "--json",
            "eval",
            "--workload",
            WORKLOAD,
            "--kernel",
            "candidate.py",
        ],
    );
    signal(&child, libc::SIGHUP);
    let r: Run = child.wait_with_output().unwrap().into();
    assert_eq!(r.code, 3, "{}\n{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["interrupted"], true, "{v}");
    let statuses: Vec<&str> = ["export", "compile"]
        .iter()
        .filter_map(|s| v[s]["status"].as_str())
        .collect();
    assert!(statuses.contains(&"cancelled"), "{v}");
    assert!(!statuses.contains(&"crashed"), "{v}");
    let left = p.leftovers();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn workers_die_with_jb_even_on_sigkill() {
    let p = Proj::new("");
    std::fs::write(p.root().join("candidate.py"), hanging_candidate(&p.marker)).unwrap();
    let mut child = start_and_wait_for_candidate(&p, &["--json", "build", "attack"]);
    signal(&child, libc::SIGKILL);
    let _ = child.wait();
    wait_until("the workers to die", || p.leftovers().is_empty());
}

#[test]
fn doctor_reports_the_sandbox() {
    let p = Proj::new(BENIGN);
    let r = p.jb(&["--json", "doctor"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = r.json();
    assert_eq!(v["sandbox"]["ok"], true, "{}", v["sandbox"]);
    assert!(v["sandbox"]["startup_ms"].as_f64().unwrap() > 0.0);
    // Which limits the kernel enforces here: every one is either enforced or listed with why
    // not, and the account is the one a sandboxed step's result carries.
    let limits = &v["sandbox"]["limits"];
    let enforced: Vec<&str> = limits["enforced"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let missing = limits["not_enforced"].as_object().unwrap();
    for name in jb::exec::sandbox::LIMIT_NAMES {
        assert!(
            enforced.contains(name) != missing.contains_key(*name),
            "{name}: {limits}"
        );
    }
    assert!(enforced.contains(&"user_namespace"), "{limits}");
    assert_eq!(limits["pids_max"], 512, "{limits}");
    let r: Run = p
        .command(&["--json", "doctor"])
        .env("JB_BWRAP", "/nonexistent/bwrap")
        .output()
        .unwrap()
        .into();
    let v = r.json();
    assert_eq!(v["sandbox"]["ok"], false, "{}", v["sandbox"]);
}

/// A candidate that finds the worker's protocol writer and answers for it (then exits, or lets
/// the worker answer too).
fn forging_candidate(exit_after: bool) -> String {
    format!(
        r#"
import gc, os, sys
worker = next(o for o in gc.get_objects() if type(o).__name__ == "Worker" and hasattr(o, "ops"))
frame, rid = sys._getframe(), None
while frame is not None:
    if frame.f_code.co_name == "handle" and "rid" in frame.f_locals:
        rid = frame.f_locals["rid"]
    frame = frame.f_back
worker.send({{"id": rid, "ok": True, "result": {{"status": "ok", "has_pallas_call": True, "compile_ms": 0.001}}}})
if {exit_after}:
    os._exit(0)

def workload(x, w):
    return x * w
"#,
        exit_after = if exit_after { "True" } else { "False" }
    )
}

#[test]
fn forged_worker_answers_are_rejected() {
    for exit_after in [true, false] {
        let p = Proj::new(&forging_candidate(exit_after));
        let r = p.jb(&["--json", "build", "attack"]);
        let summary = r.json();
        let compile = step(&summary, "attack/compile");
        assert_eq!(compile["status"], "rejected", "{compile}\n{}", r.stderr);
        let why = compile["result"]["reasons"][0].as_str().unwrap();
        assert!(why.starts_with("forged worker answer"), "{why}");
        assert_eq!(compile["result"]["claimed"]["compile_ms"], 0.001);
    }
}

/// Filling the disk through the one writable host folder: the worker is killed past the limit.
#[test]
fn a_candidate_that_fills_its_scratch_folder_is_stopped() {
    let p = Proj::new(
        "import os, time\nwith open(os.path.join(os.environ['HOME'], 'fill.bin'), 'wb') as f:\n    for _ in range(64):\n        f.write(b'\\0' * (1 << 20))\n        f.flush()\ntime.sleep(20)\n",
    );
    let r: Run = p
        .command(&["--json", "build", "attack"])
        .env("JB_SANDBOX_SCRATCH_MB", "16")
        .output()
        .unwrap()
        .into();
    let summary = r.json();
    let compile = step(&summary, "attack/compile");
    assert_eq!(compile["status"], "crashed", "{compile}");
    let why = compile["result"]["reasons"][0].as_str().unwrap();
    assert!(why.contains("sandbox scratch folder"), "{why}");
    // Nothing of it is kept.
    assert!(compile["result"]["files"].is_null() || !compile.to_string().contains("fill.bin"));
}
