//! `jb agent` end to end against a loopback OpenAI-compatible server started by the tests: every
//! method on tiny workloads (12p_RMSNorm, 8p_GEMM) with recorded answers (broken ones and the
//! repository's real Pallas kernels), resuming a killed run without repeating a request, retries
//! on 429/503, and an unreachable endpoint.
//!
//! Tests that evaluate candidates use the repository's Python environment (`jb setup` once,
//! `--pyenv <repo>/cache/pyenv`) and a temporary cache.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------
// A tiny OpenAI-compatible server.

enum Reply {
    /// 200 with this assistant message.
    Answer(String),
    /// An HTTP error status, with an optional Retry-After header.
    Status(u16, Option<&'static str>),
    /// Never answer (the connection stays open).
    Hang,
}

type Policy = dyn Fn(usize, &Value) -> Reply + Send + Sync;

struct Server {
    url: String,
    /// Every request body received, in order of arrival.
    bodies: Arc<Mutex<Vec<Value>>>,
    answered: Arc<AtomicUsize>,
    policy: Arc<Mutex<Arc<Policy>>>,
}

impl Server {
    fn start(policy: impl Fn(usize, &Value) -> Reply + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let answered = Arc::new(AtomicUsize::new(0));
        let policy: Arc<Mutex<Arc<Policy>>> = Arc::new(Mutex::new(Arc::new(policy)));
        let (b, a, p) = (bodies.clone(), answered.clone(), policy.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (b, a, p) = (b.clone(), a.clone(), p.clone());
                std::thread::spawn(move || serve(stream, &b, &a, &p));
            }
        });
        Server {
            url,
            bodies,
            answered,
            policy,
        }
    }

    fn set_policy(&self, policy: impl Fn(usize, &Value) -> Reply + Send + Sync + 'static) {
        *self.policy.lock().unwrap() = Arc::new(policy);
    }

    fn requests(&self) -> usize {
        self.bodies.lock().unwrap().len()
    }

    fn seeds(&self) -> Vec<u64> {
        self.bodies
            .lock()
            .unwrap()
            .iter()
            .filter_map(|b| b["seed"].as_u64())
            .collect()
    }
}

fn serve(
    stream: TcpStream,
    bodies: &Mutex<Vec<Value>>,
    answered: &AtomicUsize,
    policy: &Mutex<Arc<Policy>>,
) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone stream"));
    let mut stream = stream;
    loop {
        // One request per iteration (keep-alive connections send several).
        let mut content_length = 0usize;
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if !line.starts_with("POST ") {
            return;
        }
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    content_length = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; content_length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let index = {
            let mut b = bodies.lock().unwrap();
            b.push(body.clone());
            b.len() - 1
        };
        let p = policy.lock().unwrap().clone();
        let (status, extra, payload) = match p(index, &body) {
            Reply::Answer(content) => {
                answered.fetch_add(1, Ordering::SeqCst);
                let v = json!({
                    "id": format!("cmpl-{index}"),
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150},
                });
                (200, String::new(), v.to_string())
            }
            Reply::Status(code, retry_after) => (
                code,
                retry_after
                    .map(|r| format!("Retry-After: {r}\r\n"))
                    .unwrap_or_default(),
                json!({"error": {"message": "slow down", "code": code}}).to_string(),
            ),
            Reply::Hang => {
                std::thread::sleep(Duration::from_secs(3600));
                return;
            }
        };
        let reason = match status {
            200 => "OK",
            429 => "Too Many Requests",
            503 => "Service Unavailable",
            _ => "Error",
        };
        let resp = format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: keep-alive\r\n\r\n{payload}",
            payload.len()
        );
        if stream.write_all(resp.as_bytes()).is_err() {
            return;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Recorded answers.

fn repo() -> PathBuf {
    common::repo_root()
}

fn kernel(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap()
}

fn answer_with(code: &str) -> String {
    format!(
        "Here is the kernel.\n\n```python\n{}\n```\n",
        code.trim_end()
    )
}

fn rmsnorm_ok() -> String {
    answer_with(&kernel("candidates/12p_RMSNorm/rmsnorm_pallas.py"))
}

fn gemm_ok() -> String {
    answer_with(&kernel("candidates/8p_GEMM/gemm_pallas.py"))
}

/// Wrong output: the right structure, a scaled result.
fn rmsnorm_wrong() -> String {
    answer_with(&kernel("candidates/12p_RMSNorm/rmsnorm_pallas.py").replace(
        "o_ref[...] = (y * scale_ref",
        "o_ref[...] = (2.0 * y * scale_ref",
    ))
}

fn gemm_wrong() -> String {
    answer_with(
        &kernel("candidates/8p_GEMM/gemm_pallas.py")
            .replace("acc_ref[...] += jnp.dot", "acc_ref[...] -= jnp.dot"),
    )
}

/// Fails to trace: a name that does not exist.
fn broken() -> String {
    answer_with("import jax\n\n\ndef workload(*inputs):\n    return undefined_kernel(*inputs)\n")
}

fn no_code() -> String {
    "I would need more information before writing this kernel.".to_string()
}

fn user_prompt(body: &Value) -> &str {
    body["messages"][1]["content"].as_str().unwrap_or("")
}

fn workload_of(body: &Value) -> &'static str {
    if user_prompt(body).contains("# Benchmark\n\n12p_RMSNorm") {
        "12p"
    } else if user_prompt(body).contains("# Benchmark\n\n8p_GEMM") {
        "8p"
    } else {
        "?"
    }
}

/// The scripted model: first prompts get a mix keyed by the sample's seed; a prompt with
/// feedback gets the correct kernel (refinement works).
fn scripted(_: usize, body: &Value) -> Reply {
    let seed = body["seed"].as_u64().unwrap_or(0);
    let refining = user_prompt(body).contains("# Result");
    let text = match (workload_of(body), refining, seed % 3) {
        ("12p", true, _) => rmsnorm_ok(),
        ("8p", true, _) => gemm_ok(),
        ("12p", false, 0) => no_code(),
        ("12p", false, 1) => broken(),
        ("12p", false, _) => rmsnorm_ok(),
        ("8p", false, 0) => gemm_wrong(),
        ("8p", false, 1) => gemm_ok(),
        ("8p", false, _) => rmsnorm_wrong(), // the wrong workload's kernel: a compile error
        _ => no_code(),
    };
    Reply::Answer(text)
}

// ---------------------------------------------------------------------------------------------
// Running jb.

fn pyenv() -> PathBuf {
    static SETUP: OnceLock<PathBuf> = OnceLock::new();
    SETUP
        .get_or_init(|| {
            let env = repo().join("cache/pyenv");
            let out = Command::new(common::jb_bin())
                .args(["--pyenv", env.to_str().unwrap(), "setup"])
                .current_dir(repo())
                .env_remove("JB_CACHE_DIR")
                .output()
                .expect("run jb setup");
            assert!(
                out.status.success(),
                "jb setup failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            env
        })
        .clone()
}

fn jb_cmd(cache: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(common::jb_bin());
    c.args([
        "--cache-dir",
        cache.to_str().unwrap(),
        "--pyenv",
        pyenv().to_str().unwrap(),
        "--scale",
        "tiny",
    ])
    .args(args)
    .current_dir(repo())
    .env_remove("JB_CACHE_DIR")
    .env_remove("OPENAI_API_KEY")
    .env("NO_COLOR", "1");
    c
}

fn jb(cache: &Path, args: &[&str]) -> common::Run {
    jb_cmd(cache, args).output().expect("run jb").into()
}

fn agent_args<'a>(server: &'a Server, model: &'a str, method: &'a [&'a str]) -> Vec<&'a str> {
    let mut v = vec!["--json", "agent"];
    v.extend_from_slice(method);
    v.extend_from_slice(&[
        "--endpoint",
        &server.url,
        "--model",
        model,
        "--seed",
        "0",
        "--backoff",
        "0.1",
    ]);
    v
}

fn outcomes(out: &Value) -> Value {
    out["summary"]["outcomes"].clone()
}

fn count(out: &Value, outcome: &str) -> u64 {
    out["summary"]["outcomes"][outcome].as_u64().unwrap_or(0)
}

fn print_summary(label: &str, out: &Value) {
    let best: Vec<String> = out["benchmarks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|b| {
            format!(
                "{} {}",
                b["workload"].as_str().unwrap_or("?"),
                b["best_speedup"]
            )
        })
        .collect();
    println!(
        "{label}: requests {} cached {} outcomes {} best [{}] geomean {} mean {} correct {}/{} fast1 {}",
        out["requests"],
        out["cached_responses"],
        outcomes(out),
        best.join(", "),
        out["summary"]["geomean_speedup"],
        out["summary"]["mean_speedup"],
        out["summary"]["correct"],
        out["summary"]["benchmarks"],
        out["summary"]["fast1"]
    );
}

// ---------------------------------------------------------------------------------------------

#[test]
fn every_method_end_to_end_then_a_rerun_sends_nothing() {
    let cache = tempfile::tempdir().unwrap();
    let server = Server::start(scripted);
    let wl = ["--workload", "12p", "8p"];
    let runs: [(&str, Vec<&str>, u64); 4] = [
        (
            "best-of-n",
            vec!["--method", "best-of-n", "--samples", "3"],
            3,
        ),
        (
            "iterative",
            vec!["--method", "iterative", "--chains", "2", "--turns", "2"],
            4,
        ),
        (
            "iterative-ctx",
            vec!["--method", "iterative-ctx", "--chains", "2", "--turns", "2"],
            4,
        ),
        (
            "beam",
            vec![
                "--method",
                "beam",
                "--beam",
                "1",
                "--candidates",
                "2",
                "--translate-iters",
                "1",
                "--optimize-iters",
                "1",
            ],
            4,
        ),
    ];
    let mut results = Vec::new();
    for (name, method, budget) in &runs {
        let before = server.requests();
        let mut m = method.clone();
        m.extend_from_slice(&wl);
        let model = format!("test-model-{name}");
        let r = jb(cache.path(), &agent_args(&server, &model, &m));
        assert_eq!(r.code, 0, "{name}: {}\n{}", r.stdout, r.stderr);
        let out = r.json();
        print_summary(name, &out);
        let sent = server.requests() - before;
        assert_eq!(out["requests"], json!(sent), "{name}: requests counted");
        assert_eq!(sent as u64, budget * 2, "{name}: one request per sample");
        assert_eq!(out["budget"], json!(budget));
        assert_eq!(out["summary"]["samples"], json!(budget * 2));
        assert_eq!(out["summary"]["benchmarks"], 2);
        let total: u64 = out["summary"]["outcomes"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(total, budget * 2);
        assert_eq!(count(&out, "eval_error"), 0, "{name}: {}", r.stderr);
        assert_eq!(count(&out, "api_error"), 0);
        let fast1 = out["summary"]["fast1"].as_array().unwrap();
        assert_eq!(fast1.len() as u64, *budget);
        results.push(out);
    }
    // Every candidate's export ran in a process of its own (with sandboxes started ahead,
    // issue 21.2, as without): no two export steps share a worker.
    let db = rusqlite::Connection::open(cache.path().join("jb.sqlite")).unwrap();
    let mut stmt = db
        .prepare("SELECT result FROM actions WHERE step_id LIKE '%/export%'")
        .unwrap();
    let pids: Vec<u64> = stmt
        .query_map([], |row| row.get::<_, String>(0))
        .unwrap()
        .filter_map(|r| serde_json::from_str::<Value>(&r.unwrap()).ok())
        .filter_map(|v| v["worker_pid"].as_u64())
        .collect();
    assert!(pids.len() >= 4, "{pids:?}");
    let distinct: std::collections::BTreeSet<u64> = pids.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        pids.len(),
        "a worker served two candidates: {pids:?}"
    );
    // best-of-n, seeds 0,1,2 per workload: 12p no code / trace error / correct,
    // 8p wrong output / correct / the other workload's kernel (compile error).
    let bon = &results[0];
    assert_eq!(count(bon, "no_code"), 1);
    assert_eq!(count(bon, "compile_error"), 2);
    assert_eq!(count(bon, "incorrect"), 1);
    assert_eq!(
        count(bon, "correct_slower") + count(bon, "correct_faster"),
        2
    );
    assert_eq!(bon["summary"]["correct"], 2);
    let g = bon["summary"]["geomean_speedup"].as_f64().unwrap();
    assert!(g >= 1.0, "floored geomean {g}");
    // Iterative: turn 0 is seeds 0 and 1 (chains 0, 1), turn 1 refines with feedback and gets
    // the correct kernel in every chain.
    for out in &results[1..3] {
        for b in out["benchmarks"].as_array().unwrap() {
            let samples = b["samples_detail"].as_array().unwrap();
            assert_eq!(samples.len(), 4);
            for s in samples.iter().filter(|s| s["step"] == 1) {
                assert!(s["outcome"].as_str().unwrap().starts_with("correct"), "{s}");
                assert_eq!(s["parent"], json!(s["number"].as_u64().unwrap() - 2));
            }
        }
        assert_eq!(out["summary"]["correct"], 2);
    }
    // The context pack is in front of iterative-ctx's prompts only.
    let bodies = server.bodies.lock().unwrap().clone();
    let ctx_prompts: Vec<&Value> = bodies
        .iter()
        .filter(|b| b["model"] == "test-model-iterative-ctx")
        .collect();
    assert_eq!(ctx_prompts.len(), 8);
    assert!(
        ctx_prompts
            .iter()
            .all(|b| user_prompt(b).starts_with("# Context")
                && user_prompt(b).contains("pallas_call"))
    );
    assert!(bodies
        .iter()
        .filter(|b| b["model"] == "test-model-iterative")
        .all(|b| !user_prompt(b).starts_with("# Context")));
    // Turn 1 prompts carry feedback, the previous source and (where correct) a profile.
    let t1: Vec<&Value> = bodies
        .iter()
        .filter(|b| b["model"] == "test-model-iterative" && user_prompt(b).contains("# Result"))
        .collect();
    assert_eq!(t1.len(), 4);
    assert!(t1.iter().any(|b| user_prompt(b).contains("INCORRECT")
        && user_prompt(b).contains("# Your previous kernel")));
    // Beam: the optimise iteration refines the best kernel of the translate iteration.
    let beam = &results[3];
    let beam_prompts: Vec<&Value> = bodies
        .iter()
        .filter(|b| b["model"] == "test-model-beam")
        .collect();
    assert_eq!(beam_prompts.len(), 8);
    assert_eq!(
        beam_prompts
            .iter()
            .filter(|b| user_prompt(b).contains("# Result"))
            .count(),
        4,
        "the optimise iteration refines the beam"
    );
    // 8p's beam holds a correct kernel: its optimise prompts carry the optimisation menu;
    // 12p's holds a kernel that failed to trace: its prompts ask for a fix.
    assert_eq!(
        beam_prompts
            .iter()
            .filter(|b| user_prompt(b).contains("(1) larger") && workload_of(b) == "8p")
            .count(),
        2
    );
    assert_eq!(beam["summary"]["correct"], 2);

    // Rerun every method: everything from the cache, no request.
    let before = server.requests();
    for (name, method, budget) in &runs {
        let mut m = method.clone();
        m.extend_from_slice(&wl);
        let model = format!("test-model-{name}");
        let t0 = Instant::now();
        let r = jb(cache.path(), &agent_args(&server, &model, &m));
        assert_eq!(r.code, 0, "{name} rerun: {}", r.stderr);
        let out = r.json();
        println!("{name} rerun: {:.1} s", t0.elapsed().as_secs_f64());
        assert_eq!(out["requests"], 0, "{name} rerun");
        assert_eq!(out["cached_responses"], json!(budget * 2));
        assert_eq!(
            out["summary"]["outcomes"],
            results.iter().find(|x| x["method"] == *name).unwrap()["summary"]["outcomes"]
        );
        // The same rerun as a table.
        let args = agent_args(&server, &model, &m);
        let r = jb(cache.path(), &args[1..]);
        assert_eq!(r.code, 0, "{name} table: {}", r.stderr);
        println!("{}", r.stdout);
        assert!(
            r.stdout.contains("geomean speedup (floor 1x)"),
            "{}",
            r.stdout
        );
        assert!(
            r.stdout.contains(&format!(
                "requests sent 0, answers from the cache {}",
                budget * 2
            )),
            "{}",
            r.stdout
        );
    }
    assert_eq!(server.requests(), before, "a rerun sends no request");

    // The run database has every run and sample.
    let db = rusqlite::Connection::open(cache.path().join("jb.sqlite")).unwrap();
    let runs_ok: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM agent_runs WHERE status = 'ok'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(runs_ok, 12);
    let samples: i64 = db
        .query_row("SELECT COUNT(*) FROM agent_samples", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        samples,
        3 * 2 * (3 + 4 + 4 + 4),
        "first runs and two reruns"
    );
}

#[test]
fn killed_run_resumes_without_repeating_a_request() {
    let cache = tempfile::tempdir().unwrap();
    // Answers without code need no evaluation: this test is about the requests.
    let server = Server::start(|i, _| {
        if i < 3 {
            Reply::Answer(no_code())
        } else {
            Reply::Hang
        }
    });
    let args = agent_args(
        &server,
        "resume-model",
        &[
            "--method",
            "best-of-n",
            "--samples",
            "6",
            "--workload",
            "12p",
            "--parallel",
            "1",
        ],
    );
    let mut child = jb_cmd(cache.path(), &args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while server.requests() < 4 {
        assert!(
            t0.elapsed() < Duration::from_secs(900),
            "watchdog: jb never sent a 4th request"
        );
        assert!(child.try_wait().unwrap().is_none(), "jb exited early");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Three answers are in; the fourth request hangs. Give jb a moment to store, then kill -9.
    std::thread::sleep(Duration::from_millis(1500));
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(server.answered.load(Ordering::SeqCst), 3);

    server.set_policy(|_, _| Reply::Answer(no_code()));
    let r = jb(cache.path(), &args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = r.json();
    print_summary("resumed", &out);
    assert_eq!(
        out["requests"], 3,
        "only the three unanswered samples are asked again"
    );
    assert_eq!(out["cached_responses"], 3);
    assert_eq!(count(&out, "no_code"), 6);
    // Seeds identify samples: 0..2 answered in the first run, 3 hung, then 3..5.
    assert_eq!(server.seeds(), [0, 1, 2, 3, 3, 4, 5]);
    // A third run asks nothing.
    let r = jb(cache.path(), &args);
    assert_eq!(r.json()["requests"], 0);
    assert_eq!(server.requests(), 7);
}

#[test]
fn rate_limits_and_server_errors_are_retried() {
    let cache = tempfile::tempdir().unwrap();
    let server = Server::start(|i, _| match i {
        0 => Reply::Status(429, Some("1")),
        1 => Reply::Status(503, None),
        _ => Reply::Answer(no_code()),
    });
    let args = agent_args(
        &server,
        "retry-model",
        &[
            "--method",
            "best-of-n",
            "--samples",
            "1",
            "--workload",
            "12p",
        ],
    );
    // (How long it waited is the backoff's decision, unit-tested in agent::backoff; a duration
    // measured here would depend on the machine's load.)
    let r = jb(cache.path(), &args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = r.json();
    assert_eq!(server.requests(), 3, "429, then 503, then the answer");
    assert_eq!(out["requests"], 3);
    assert_eq!(count(&out, "no_code"), 1);
}

#[test]
fn prompts_the_endpoint_refuses_are_cached_api_errors_and_the_study_goes_on() {
    // 400 (context length), 413 (payload too large) and 422 (unprocessable) are answers about
    // one prompt: each is that sample's `api_error`, cached, and the other samples still run.
    let cache = tempfile::tempdir().unwrap();
    let server = Server::start(|i, _| match i {
        0 => Reply::Status(400, None),
        1 => Reply::Status(413, None),
        2 => Reply::Status(422, None),
        _ => Reply::Answer(no_code()),
    });
    let args = agent_args(
        &server,
        "refusing-model",
        &[
            "--method",
            "best-of-n",
            "--samples",
            "5",
            "--workload",
            "12p",
        ],
    );
    let r = jb(cache.path(), &args);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let out = r.json();
    assert_eq!(server.requests(), 5, "no retries of a refused prompt");
    assert_eq!(count(&out, "api_error"), 3, "{out:#}");
    assert_eq!(count(&out, "no_code"), 2, "{out:#}");
    // A rerun asks nothing: the refusals are cached outcomes.
    let r = jb(cache.path(), &args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["requests"], 0);
    assert_eq!(count(&r.json(), "api_error"), 3);
    assert_eq!(server.requests(), 5);
}

#[test]
fn unreachable_endpoint_is_a_clear_error_with_exit_code_3() {
    let cache = tempfile::tempdir().unwrap();
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/v1");
    let r = jb(
        cache.path(),
        &[
            "agent",
            "--method",
            "best-of-n",
            "--samples",
            "2",
            "--workload",
            "12p",
            "--endpoint",
            &url,
            "--model",
            "m",
        ],
    );
    assert_eq!(r.code, 3, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("cannot reach the agent endpoint") && r.stderr.contains(&url),
        "{}",
        r.stderr
    );
}

#[test]
fn command_and_answer_file_agents() {
    let cache = tempfile::tempdir().unwrap();
    let args = [
        "--json",
        "agent",
        "--method",
        "best-of-n",
        "--samples",
        "2",
        "--workload",
        "12p",
        "--agent-command",
        "grep -c '# Reference implementation' >/dev/null && echo \"no code for $JB_AGENT_WORKLOAD $JB_AGENT_SAMPLE\"",
    ];
    let r = jb(cache.path(), &args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = r.json();
    assert_eq!(count(&out, "no_code"), 2);
    assert_eq!(out["agent"]["kind"], "command");
    // The answers are cached: a rerun runs no command.
    let r = jb(cache.path(), &args);
    assert_eq!(r.json()["requests"], 0);

    let answers = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(answers.path().join("12p")).unwrap();
    std::fs::write(answers.path().join("12p/a.md"), no_code()).unwrap();
    let r = jb(
        cache.path(),
        &[
            "--json",
            "agent",
            "--method",
            "best-of-n",
            "--samples",
            "1",
            "--workload",
            "12p",
            "--answers-dir",
            answers.path().to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(count(&r.json(), "no_code"), 1);
}

#[test]
fn bad_usage_is_exit_code_2() {
    let cache = tempfile::tempdir().unwrap();
    for args in [
        vec![
            "agent",
            "--method",
            "best-of-n",
            "--chains",
            "2",
            "-w",
            "12p",
            "--answers-dir",
            ".",
        ],
        vec!["agent", "--method", "beam", "-w", "12p"],
        vec![
            "agent",
            "--method",
            "iterative",
            "-w",
            "12p",
            "--endpoint",
            "http://127.0.0.1:9/v1",
        ],
        vec![
            "agent",
            "--method",
            "iterative",
            "-w",
            "nope",
            "--answers-dir",
            ".",
        ],
        vec![
            "agent",
            "--method",
            "iterative",
            "-w",
            "12p",
            "--endpoint",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--api-key-env",
            "JB_TEST_SURELY_UNSET_KEY",
        ],
    ] {
        let r = jb(cache.path(), &args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
    }
}
