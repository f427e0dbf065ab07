//! `--executor ray` with the real binary against a real local Ray cluster (a head and two worker
//! nodes with distinct custom resources). The cluster and every jb that talks to it live in a
//! private network namespace with only loopback up (`unshare -n`, as root), so no packet leaves
//! the machine. Ray is installed into the repository's Python environment by `jb setup --with ray`.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::{jb_bin, repo_root, Run, TestProject};

fn pyenv() -> PathBuf {
    repo_root().join("cache/pyenv")
}

/// `jb setup --with ray` on the repository's environment (idempotent, locked).
fn ensure_ray() {
    common::setup_repo_pyenv(&["--with", "ray"]);
}

struct Cluster {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    address: String,
    nodes: BTreeMap<String, String>,
    _node_dir: tempfile::TempDir,
}

impl Cluster {
    /// Start `tests/ray_cluster.py` in a new network namespace; `env` is passed to every node.
    fn start(specs: &[&str], env: &[(&str, &Path)]) -> Cluster {
        let node_dir = tempfile::tempdir().unwrap();
        let python = pyenv().join("bin/python");
        let script = format!(
            "ip link set lo up && exec {} -u {} {}",
            python.display(),
            repo_root().join("tests/ray_cluster.py").display(),
            specs
                .iter()
                .map(|s| format!("'{s}'"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let mut cmd = Command::new("unshare");
        cmd.args(["-n", "sh", "-c", &script])
            .env("JB_RAY_NODE_DIR", node_dir.path())
            .env("RAY_USAGE_STATS_ENABLED", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(node_dir.path().join("cluster.err")).unwrap());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("unshare (needs root, as in CI)");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let first = rx
            .recv_timeout(Duration::from_secs(180))
            .unwrap_or_else(|_| {
                panic!(
                    "the test cluster did not come up: {}",
                    std::fs::read_to_string(node_dir.path().join("cluster.err"))
                        .unwrap_or_default()
                )
            });
        let v: Value = serde_json::from_str(&first).unwrap();
        let nodes = v["nodes"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (v.as_str().unwrap().to_string(), k.clone()))
            .collect();
        Cluster {
            child,
            stdin,
            lines: rx,
            address: v["address"].as_str().unwrap().to_string(),
            nodes,
            _node_dir: node_dir,
        }
    }

    /// jb inside the cluster's network namespace.
    fn jb(&self, dir: &Path, args: &[&str]) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net=/proc/{}/ns/net", self.child.id()))
            .arg("--")
            .arg(jb_bin())
            .args(["--executor", "ray", "--ray-address", &self.address])
            .args(args)
            .current_dir(dir)
            .env_remove("JB_CACHE_DIR")
            .env("NO_COLOR", "1");
        c
    }

    /// Remove a worker node as if its machine died; returns its name.
    fn kill(&mut self, node_id: &str) -> String {
        assert!(
            self.nodes.contains_key(node_id),
            "{node_id} is not a node of the test cluster: {:?}",
            self.nodes
        );
        writeln!(self.stdin, "kill {node_id}").unwrap();
        self.stdin.flush().unwrap();
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(60))
            .expect("no answer to kill");
        assert!(line.starts_with("killed "), "{line}");
        line["killed ".len()..].to_string()
    }
}

impl Cluster {
    /// Add a worker node (`NAME:RESOURCES_JSON|ENV_JSON`, see tests/ray_cluster.py); its node id.
    fn add(&mut self, spec: &str) -> String {
        writeln!(self.stdin, "add {spec}").unwrap();
        self.stdin.flush().unwrap();
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(120))
            .expect("no answer to add");
        let mut words = line.split_whitespace();
        assert_eq!(words.next(), Some("added"), "{line}");
        let (name, id) = (words.next().unwrap(), words.next().unwrap());
        self.nodes.insert(id.to_string(), name.to_string());
        id.to_string()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// step -> (key, status) of a `jb build --json` summary.
fn keys_and_statuses(r: &Run) -> BTreeMap<String, (String, String)> {
    r.json()["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["step"].as_str().unwrap().to_string(),
                (
                    s["key"].as_str().unwrap().to_string(),
                    s["status"].as_str().unwrap().to_string(),
                ),
            )
        })
        .collect()
}

fn run(mut c: impl std::borrow::BorrowMut<Command>) -> Run {
    c.borrow_mut().output().expect("run jb").into()
}

/// A command pipeline: a plain step, a slow one holding a device (the one whose node is
/// killed), three quick device steps and a total that reads the upstream outputs.
fn command_project() -> TestProject {
    let p = TestProject::new();
    p.write("src/in.txt", "hello ray\n");
    p.write(
        "pipelines/p.yaml",
        r#"steps:
  gen:
    kind: command
    inputs: ["src/in.txt"]
    outputs: ["out/gen.txt"]
    run: "tr a-z A-Z < src/in.txt > out/gen.txt"
  slow:
    kind: command
    needs: [gen]
    resources: {device: 1}
    outputs: ["out/slow.txt"]
    run: "echo \"$JB_RAY_NODE_ID\" >> \"$JB_TEST_ATTEMPTS\"; sleep 4; rev < out/gen.txt > out/slow.txt"
  quick:
    kind: command
    foreach: [{values: {n: [1, 2, 3]}}]
    needs: [gen]
    resources: {device: 1}
    outputs: ["out/q{n}.txt"]
    run: "sleep 0.2; cut -c1-{n} out/gen.txt > out/q{n}.txt"
  total:
    kind: command
    needs: [slow, quick]
    outputs: ["out/total.txt"]
    run: "cat out/slow.txt out/q*.txt | wc -l > out/total.txt"
"#,
    );
    p
}

/// The cluster tests take turns (two clusters at once would crowd a small machine).
fn one_cluster_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|p| p.into_inner())
}

fn jb_local(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(jb_bin());
    c.args(args)
        .current_dir(dir)
        .env_remove("JB_CACHE_DIR")
        .env_remove("JB_EXECUTOR")
        .env("NO_COLOR", "1");
    c
}

#[test]
fn unreachable_cluster_exits_3_naming_the_address() {
    ensure_ray();
    let p = TestProject::new();
    p.write(
        "pipelines/p.yaml",
        "steps:\n  a:\n    kind: command\n    outputs: [a.txt]\n    run: \"echo a > a.txt\"\n",
    );
    let pyenv = pyenv();
    let pyenv = pyenv.to_str().unwrap();
    let r = run(
        jb_local(p.path(), &["--pyenv", pyenv, "build", "--executor", "ray"])
            .env_remove("JB_RAY_ADDRESS"),
    );
    assert_eq!(r.code, 2, "no address is a usage error: {}", r.stderr);
    assert!(r.stderr.contains("--ray-address"), "{}", r.stderr);
    // Port 9 on loopback: nothing listens there.
    let r = run(jb_local(
        p.path(),
        &[
            "--pyenv",
            pyenv,
            "build",
            "--executor",
            "ray",
            "--ray-address",
            "127.0.0.1:9",
        ],
    ));
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("127.0.0.1:9"), "{}", r.stderr);
    assert!(!p.path().join("a.txt").exists(), "nothing ran");
    // The project's jb.yaml names the cluster too.
    p.write("jb.yaml", "executor: ray\nray:\n  address: 127.0.0.1:9\n");
    let r = run(jb_local(p.path(), &["--pyenv", pyenv, "build"]).env_remove("JB_RAY_ADDRESS"));
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("127.0.0.1:9"), "{}", r.stderr);
    // ... and --executor local overrides it.
    let r = run(jb_local(
        p.path(),
        &["--pyenv", pyenv, "build", "--executor", "local"],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Cache hits never touch the cluster: with everything cached, the unreachable one is fine.
    let r = run(
        jb_local(p.path(), &["--pyenv", pyenv, "build", "--json"]).env_remove("JB_RAY_ADDRESS")
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["ran"], 0, "{}", r.stdout);
}

#[test]
fn builds_on_a_cluster_match_local_ones_and_survive_a_lost_node() {
    ensure_ray();
    let _one_cluster = one_cluster_at_a_time();
    let marks = tempfile::tempdir().unwrap();
    let attempts = marks.path().join("attempts");
    let mut cluster = Cluster::start(
        &[
            r#"head:{"CPU": 1, "head": 1}"#,
            r#"b:{"CPU": 1, "device": 1, "node_b": 1}"#,
            r#"c:{"CPU": 1, "device": 1, "node_c": 1}"#,
        ],
        &[("JB_TEST_ATTEMPTS", &attempts)],
    );
    let pyenv = pyenv();
    let pyenv = pyenv.to_str().unwrap();

    // 1. Two workloads at tiny scale on the cluster, then locally on the same cache: the local
    //    executor computes the very same keys (every step is a cache hit, none runs) and gets
    //    the cluster's statuses, which are those a local build gives (compiled, correct, timed).
    let root = repo_root();
    let ray_cache = tempfile::tempdir().unwrap();
    let args = [
        "--scale",
        "tiny",
        "--pyenv",
        pyenv,
        "--cache-dir",
        ray_cache.path().to_str().unwrap(),
        "build",
        "12p",
        "8p",
        "--json",
    ];
    let on_ray = run(cluster.jb(&root, &args));
    assert_eq!(on_ray.code, 0, "ray build: {}", on_ray.stderr);
    let r = keys_and_statuses(&on_ray);
    assert!(r.len() >= 6, "{r:?}");
    for (step, (_, status)) in &r {
        let want = if step.starts_with("eval/verify") {
            "correct"
        } else {
            "ok"
        };
        assert_eq!(status, want, "{step}");
    }
    let steps = on_ray.json()["steps"].as_array().unwrap().clone();
    // Every worker step runs on a cluster node: a candidate's export step (its own code) as a
    // sandboxed Ray task (`trust: sandboxed`), its compile/verify/profile on its exported
    // program (`trust: artifact`).
    let remote = |s: &&Value| s["result"]["ray"]["node_id"].is_string();
    let export = |s: &&Value| s["step"].as_str().is_some_and(|id| id.contains("/export["));
    let (exports, others): (Vec<&Value>, Vec<&Value>) = steps.iter().partition(export);
    assert!(!exports.is_empty(), "{steps:?}");
    for e in &exports {
        assert!(remote(e), "the export ran on a cluster node: {e:#}");
        assert_eq!(e["result"]["trust"], "sandboxed", "{e:#}");
        assert!(
            e["result"]["ray"]["sandbox"]
                .as_str()
                .is_some_and(|b| b.ends_with("bwrap")),
            "in the node's bubblewrap: {e:#}"
        );
        // Under the same seccomp filter as locally (one architecture here), the account saying
        // which limits the node only polls.
        let limits = &e["result"]["kernel_limits"];
        assert!(
            limits["enforced"]
                .as_array()
                .is_some_and(|l| l.contains(&Value::from("seccomp"))),
            "{e:#}"
        );
        assert!(limits["not_enforced"]["cgroup_memory"].is_string(), "{e:#}");
    }
    assert!(
        others.iter().all(remote),
        "every other worker step ran on a cluster node"
    );
    let judged: Vec<&&Value> = others
        .iter()
        .filter(|s| {
            s["result"]["trust"]
                .as_str()
                .is_some_and(|t| t != "trusted")
        })
        .collect();
    assert!(!judged.is_empty(), "{steps:?}");
    assert!(
        judged.iter().all(|s| s["result"]["trust"] == "artifact"),
        "candidate steps on the cluster judge the exported program: {judged:?}"
    );
    // A local build of the candidates' export and compile steps in a fresh cache computes the
    // same keys: the export's files are the same bytes wherever it ran (the compile step's key
    // holds them), and the statuses agree.
    let fresh = tempfile::tempdir().unwrap();
    let targets: Vec<String> = steps
        .iter()
        .filter_map(|s| s["step"].as_str())
        .filter(|id| id.starts_with("eval/compile["))
        .map(str::to_string)
        .collect();
    assert!(!targets.is_empty(), "{steps:?}");
    let mut local_args = vec![
        "--scale",
        "tiny",
        "--pyenv",
        pyenv,
        "--cache-dir",
        fresh.path().to_str().unwrap(),
        "build",
        "--json",
    ];
    local_args.extend(targets.iter().map(String::as_str));
    let here = run(jb_local(&root, &local_args));
    assert_eq!(here.code, 0, "{}", here.stderr);
    let here = keys_and_statuses(&here);
    for (step, ks) in &here {
        assert_eq!(Some(ks), r.get(step), "{step}: local vs cluster");
    }
    assert!(here.keys().any(|s| s.contains("/export[")), "{here:?}");
    let again = run(jb_local(&root, &args));
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(
        again.json()["ran"],
        0,
        "local build after the cluster's: {}",
        again.stdout
    );
    assert_eq!(
        keys_and_statuses(&again),
        r,
        "the same keys and statuses locally as on the cluster"
    );

    // A result is never filed under another machine's key: pretend the cached fingerprint of
    // the cluster says TPU v6e. The keys then differ (nothing cached), every judge refuses, no
    // result is kept and the stale fingerprint is dropped; the next build probes the cluster
    // again and finds everything cached.
    let fp_file = ray_cache.path().join("fingerprint-ray.json");
    let mut stored: Value =
        serde_json::from_str(&std::fs::read_to_string(&fp_file).unwrap()).unwrap();
    stored["fingerprint"]["device_kind"] = Value::from("TPU v6e");
    std::fs::write(&fp_file, stored.to_string()).unwrap();
    let one = [&args[..8], &["--json"]].concat();
    let wrong = run(cluster.jb(&root, &one));
    assert_ne!(wrong.code, 0, "{}", wrong.stdout);
    assert!(
        wrong.stdout.contains("environment differs"),
        "{}",
        wrong.stdout
    );
    assert!(
        !fp_file.exists(),
        "the stale cluster fingerprint is dropped"
    );
    let right = run(cluster.jb(&root, &one));
    assert_eq!(right.code, 0, "{}", right.stderr);
    assert_eq!(
        right.json()["ran"],
        0,
        "nothing of the refused run was cached: {}",
        right.stdout
    );

    // 2. A command pipeline; the node running the slow device step is killed mid-step.
    let p = command_project();
    let local_attempts = marks.path().join("local-attempts");
    let lcache = tempfile::tempdir().unwrap();
    let local = run(jb_local(
        p.path(),
        &[
            "--pyenv",
            pyenv,
            "--cache-dir",
            lcache.path().to_str().unwrap(),
            "build",
            "--json",
        ],
    )
    .env("JB_TEST_ATTEMPTS", &local_attempts));
    assert_eq!(local.code, 0, "{}", local.stderr);
    let expected_total = p.read("out/total.txt");
    std::fs::remove_dir_all(p.path().join("out")).unwrap();
    let child = cluster
        .jb(p.path(), &["--pyenv", pyenv, "build", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let first_attempt = || {
        std::fs::read_to_string(&attempts).ok().and_then(|text| {
            text.lines()
                .next()
                .filter(|l| !l.trim().is_empty())
                .map(|l| l.trim().to_string())
        })
    };
    wait_until("the slow step starting", || first_attempt().is_some());
    let first_node = first_attempt().unwrap();
    let killed = cluster.kill(&first_node);
    assert!(killed == "b" || killed == "c", "a device node: {killed}");
    let on_ray: Run = child.wait_with_output().unwrap().into();
    assert_eq!(on_ray.code, 0, "the build completes: {}", on_ray.stderr);
    let tries: Vec<String> = std::fs::read_to_string(&attempts)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(tries.len(), 2, "retried once: {tries:?}");
    assert_ne!(tries[0], tries[1], "on another node: {tries:?}");
    assert_eq!(p.read("out/total.txt"), expected_total);
    assert_eq!(keys_and_statuses(&local), keys_and_statuses(&on_ray));
    let slow = on_ray.json()["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "p/slow")
        .cloned()
        .unwrap_or_else(|| panic!("no p/slow in {}", on_ray.stdout));
    assert_eq!(slow["result"]["ray"]["attempts"], 2, "{slow:#}");
    // The lost attempt was not cached as a failure: a local build is fully cached.
    let again = run(jb_local(p.path(), &["--pyenv", pyenv, "build", "--json"]));
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(again.json()["ran"], 0, "{}", again.stdout);

    // 3. `jb doctor --executor ray` shows the nodes and their resources.
    let r = run(cluster.jb(p.path(), &["--pyenv", pyenv, "doctor", "--json"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = r.json();
    let nodes = v["cluster"]["nodes"].as_array().unwrap();
    // All three nodes are listed, the killed one alive or dead (up to Ray's health checks; a
    // dead one shows no resources); the others with the custom resources they were started with.
    assert_eq!(nodes.len(), 3, "{v:#}");
    let has = |r: &str| nodes.iter().any(|n| n["resources"][r] == 1.0);
    assert!(has("head"), "the head and its resource `head`: {v:#}");
    let survivor = if killed == "b" { "node_c" } else { "node_b" };
    assert!(has(survivor), "the surviving node's `{survivor}`: {v:#}");
    assert!(
        v["cluster"]["total"]["device"].as_f64().unwrap() >= 1.0,
        "{v:#}"
    );
    assert_eq!(
        v["fingerprint"]["backend"], "cpu",
        "the judges' fingerprint: {v:#}"
    );
}

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

/// A project with workload 12p and an `export` step for every file in `candidates/`.
fn export_project() -> TestProject {
    let p = TestProject::new();
    copy_dir(
        &repo_root().join("workloads/12p_RMSNorm"),
        &p.path().join("workloads/12p_RMSNorm"),
    );
    p.write(
        "pipelines/x.yaml",
        r#"steps:
  export:
    kind: export
    foreach: [{match: "candidates/{candidate}.py"}]
    params:
      workload: "workloads/12p_RMSNorm"
      impl: {kind: candidate, path: "candidates/{candidate}.py"}
    timeout: 300
"#,
    );
    p
}

/// The `jb build --json` summary's step whose id contains `needle`.
fn step_of(r: &Run, needle: &str) -> Value {
    r.json()["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"].as_str().unwrap().contains(needle))
        .cloned()
        .unwrap_or_else(|| panic!("no step {needle} in {}", r.stdout))
}

/// Command lines of processes that mention `needle`.
fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(raw) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&raw).replace('\0', " ");
            if cmd.contains(needle) && !cmd.contains("ray_cluster.py") {
                out.push(cmd);
            }
        }
    }
    out
}

#[test]
fn candidate_code_on_the_cluster_is_sandboxed_contained_and_never_unsandboxed() {
    ensure_ray();
    let _one_cluster = one_cluster_at_a_time();
    let dirs = tempfile::tempdir().unwrap();
    let node_dir = |name: &str| dirs.path().join(name);
    let spec = |name: &str, res: &str, env: Value| format!("{name}:{res}|{env}");
    // Only `bw` has a CPU for sandboxed tasks (the device node's judge needs none), and a secret
    // in its environment; each node keeps its files in its own folder.
    let bw = spec(
        "bw",
        r#"{"CPU": 1}"#,
        serde_json::json!({"JB_RAY_NODE_DIR": node_dir("bw"), "OPENAI_API_KEY": "secret-planted-on-node"}),
    );
    let mut cluster = Cluster::start(
        &[r#"head:{"CPU": 0}"#, r#"dev:{"CPU": 0, "device": 1}"#, &bw],
        &[],
    );
    let bw_id = cluster
        .nodes
        .iter()
        .find(|(_, n)| *n == "bw")
        .map(|(id, _)| id.clone())
        .unwrap();
    let pyenv = pyenv();
    let pyenv = pyenv.to_str().unwrap();
    let p = export_project();
    let adversarial = repo_root().join("examples/adversarial");
    std::fs::create_dir_all(p.path().join("candidates")).unwrap();
    for name in ["trust_write_files", "trust_env_network"] {
        std::fs::copy(
            adversarial.join(format!("{name}.py")),
            p.path().join(format!("candidates/{name}.py")),
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let workload_before = p.read("workloads/12p_RMSNorm/workload.py");
    // A listener in the cluster's network namespace, where the attack sends what it found.
    let mut listener = Command::new("nsenter")
        .arg(format!("--net=/proc/{}/ns/net", cluster.child.id()))
        .arg("--")
        .arg(pyenv_python())
        .args(["-c", LISTENER])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut heard = BufReader::new(listener.stdout.take().unwrap());
    let mut first = String::new();
    heard.read_line(&mut first).unwrap();
    assert_eq!(first.trim(), "LISTENING");
    let build = |c: &Cluster, extra: &[&str]| {
        let mut c = c.jb(
            p.path(),
            &[
                &["--scale", "tiny", "--backend", "cpu", "--pyenv", pyenv],
                extra,
                &["build", "--json"],
            ]
            .concat(),
        );
        c.env("JB_PYTHON_DIR", repo_root().join("python"));
        c
    };

    // 1. The attacks are exported on `bw`, inside bubblewrap: nothing written, no secret, no
    //    connection; they are honest kernels otherwise, so they export.
    let r = run(build(&cluster, &[]));
    std::thread::sleep(Duration::from_millis(500));
    let _ = listener.kill();
    let _ = listener.wait();
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut heard, &mut rest);
    let heard = rest;
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    for name in ["trust_write_files", "trust_env_network"] {
        let s = step_of(&r, name);
        assert_eq!(s["status"], "ok", "{s:#}");
        assert_eq!(s["result"]["trust"], "sandboxed", "{s:#}");
        assert_eq!(
            s["result"]["ray"]["node_id"],
            bw_id.as_str(),
            "on bw: {s:#}"
        );
    }
    let tail = |name: &str| {
        step_of(&r, name)["result"]["stderr_tail"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let writes = tail("trust_write_files");
    assert!(writes.contains("blocked"), "{writes}");
    assert!(!writes.contains("WROTE"), "{writes}");
    let net = tail("trust_env_network");
    assert!(
        net.contains("secrets: []"),
        "the environment was emptied: {net}"
    );
    assert!(!net.contains("SENT"), "{net}");
    assert!(!heard.contains("CONNECTED"), "the listener heard: {heard}");
    assert!(!r.stdout.contains("secret-planted-on-node"));
    assert_eq!(p.read("workloads/12p_RMSNorm/workload.py"), workload_before);
    // The node's copies of the project are as they arrived (read-only in the sandbox).
    for root in std::fs::read_dir(node_dir("bw").join("roots"))
        .unwrap()
        .flatten()
    {
        let root = root.path();
        assert!(!root.join("python/sitecustomize.py").exists());
        let w = std::fs::read_to_string(root.join("workloads/12p_RMSNorm/workload.py")).unwrap();
        assert!(!w.contains("jb-trust-attack"), "{}", root.display());
    }

    // 2. A node whose bubblewrap cannot start (here: `JB_BWRAP=/bin/false`) takes no candidate
    //    code: the step runs in this machine's sandbox instead, and jb says so.
    cluster.kill(&bw_id);
    let nobw_id = cluster.add(&spec(
        "nobw",
        r#"{"CPU": 1}"#,
        serde_json::json!({"JB_RAY_NODE_DIR": node_dir("nobw"), "JB_BWRAP": "/bin/false"}),
    ));
    std::fs::copy(
        repo_root().join("candidates/12p_RMSNorm/rmsnorm_pallas.py"),
        p.path().join("candidates/honest.py"),
    )
    .unwrap();
    let r = run(build(&cluster, &[]));
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let s = step_of(&r, "honest");
    assert_eq!(s["status"], "ok", "{s:#}");
    assert_eq!(s["result"]["trust"], "sandboxed", "{s:#}");
    assert!(
        s["result"]["ray"]["sandbox_fallback"]
            .as_str()
            .is_some_and(|m| m.contains("/bin/false")),
        "{s:#}"
    );
    assert_eq!(
        s["result"]["ray"]["refused_by"]["node_id"],
        nobw_id.as_str()
    );
    assert!(r.stderr.contains("no working sandbox"), "{}", r.stderr);
    let probe = std::fs::read_to_string(node_dir("nobw").join("sandbox-probe.json")).unwrap();
    assert!(
        probe.contains("\"ok\": false"),
        "probed once, kept: {probe}"
    );

    // 3. A node lost mid-export: the export is sent again, to another node; the lost attempt is
    //    not a result, and the sandbox died with its node.
    cluster.kill(&nobw_id);
    let ids: Vec<String> = ["bw2", "bw3"]
        .iter()
        .map(|n| {
            cluster.add(&spec(
                n,
                r#"{"CPU": 1}"#,
                serde_json::json!({"JB_RAY_NODE_DIR": node_dir(n)}),
            ))
        })
        .collect();
    let honest = p.read("candidates/honest.py");
    p.write(
        "candidates/slow.py",
        &format!("import time\ntime.sleep(8)\n{honest}"),
    );
    let child = build(&cluster, &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let busy = || {
        ["bw2", "bw3"].into_iter().find(|n| {
            std::fs::read_dir(node_dir(n).join("work")).is_ok_and(|d| {
                d.flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with("sandbox."))
            })
        })
    };
    wait_until("the slow export starting", || busy().is_some());
    let running_on = busy().unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let lost_id = ids[if running_on == "bw2" { 0 } else { 1 }].clone();
    let other_id = ids[if running_on == "bw2" { 1 } else { 0 }].clone();
    cluster.kill(&lost_id);
    let r: Run = child.wait_with_output().unwrap().into();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let s = step_of(&r, "slow");
    assert_eq!(s["status"], "ok", "{s:#}");
    assert_eq!(s["result"]["ray"]["attempts"], 2, "{s:#}");
    assert_eq!(s["result"]["ray"]["node_id"], other_id.as_str(), "{s:#}");
    // The sandbox dies with its node (the decision); how long its processes take to go is the
    // machine's business, so only a hang guard bounds the wait.
    let lost_dir = node_dir(running_on);
    wait_until("the sandbox dying with its node", || {
        processes_mentioning(lost_dir.to_str().unwrap()).is_empty()
    });
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
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn pyenv_python() -> PathBuf {
    pyenv().join("bin/python")
}

/// Accepts on 127.0.0.1:47011 (one of the attack's ports); prints CONNECTED per connection.
const LISTENER: &str = "import socket\ns = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\ns.bind(('127.0.0.1', 47011))\ns.listen()\nprint('LISTENING', flush=True)\nwhile True:\n    c, _ = s.accept()\n    print('CONNECTED', c.recv(4096), flush=True)\n";
