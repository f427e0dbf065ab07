//! Benchmarks of the executor itself (run with `cargo bench --bench dag`):
//!
//! 1. 151 `command` steps (50 chains of 3 steps plus one aggregate): cold, no-op and
//!    one-input-change builds of jb beside GNU make on the same DAG, in one run.
//! 2. A no-op `jb build all` on the repository's full default graph, if its cache is populated
//!    (run `jb build all` first); also checks that no Python process was started.
//!
//! `JB_BENCH_BIN=/path/to/jb` times another jb binary (e.g. an older build) with the same bench.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

const CHAINS: usize = 50;

fn jb() -> String {
    std::env::var("JB_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_jb").to_string())
}

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn setup(dir: &Path) {
    for i in 0..CHAINS {
        write(
            dir,
            &format!("src/in{i}.txt"),
            &format!("input number {i}\n"),
        );
    }
    write(
        dir,
        "pipelines/chains.yaml",
        r#"steps:
  a:
    kind: command
    foreach: [{match: "src/in{n}.txt"}]
    inputs: ["src/in{n}.txt"]
    outputs: ["out/a{n}.txt"]
    run: "tr a-z A-Z < src/in{n}.txt > out/a{n}.txt"
  b:
    kind: command
    foreach: [{match: "src/in{n}.txt"}]
    needs: [a]
    outputs: ["out/b{n}.txt"]
    run: "rev < out/a{n}.txt > out/b{n}.txt"
  c:
    kind: command
    foreach: [{match: "src/in{n}.txt"}]
    needs: [b]
    outputs: ["out/c{n}.txt"]
    run: "cut -c1-8 out/b{n}.txt > out/c{n}.txt"
  total:
    kind: command
    needs: [c]
    outputs: ["out/total.txt"]
    run: "cat out/c*.txt > out/total.txt"
"#,
    );
    let mut mk = String::from("N := $(shell seq 0 49)\nall: mk/total.txt\n");
    mk.push_str("mk/a%.txt: src/in%.txt\n\t@mkdir -p mk && tr a-z A-Z < $< > $@\n");
    mk.push_str("mk/b%.txt: mk/a%.txt\n\trev < $< > $@\n");
    mk.push_str("mk/c%.txt: mk/b%.txt\n\tcut -c1-8 $< > $@\n");
    mk.push_str("mk/total.txt: $(foreach n,$(N),mk/c$(n).txt)\n\tcat $^ > $@\n");
    write(dir, "Makefile", &mk);
}

/// Wall-clock and CPU (user + system of the process and everything it waited for) milliseconds.
#[derive(Debug, Clone, Copy)]
struct Timing {
    wall: f64,
    cpu: f64,
}

/// CPU milliseconds used so far by this process's waited-for children.
fn children_cpu_ms() -> f64 {
    // SAFETY: getrusage fills the struct we pass; nothing else is shared.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    ms(u.ru_utime) + ms(u.ru_stime)
}

fn time(dir: &Path, program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Timing {
    let program = program.as_ref();
    let cpu0 = children_cpu_ms();
    let t0 = Instant::now();
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run");
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    assert!(
        out.status.success(),
        "{program:?} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Timing {
        wall: ms,
        cpu: children_cpu_ms() - cpu0,
    }
}

fn median_of(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Wall and CPU medians, each on its own.
fn median(v: Vec<Timing>) -> Timing {
    Timing {
        wall: median_of(v.iter().map(|t| t.wall).collect()),
        cpu: median_of(v.iter().map(|t| t.cpu).collect()),
    }
}

fn ran_steps(dir: &Path) -> usize {
    let out = Command::new(jb())
        .args(["build", "--json", "--dry-run"])
        .current_dir(dir)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .filter(|s| s["action"] == "run")
        .count()
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    println!("151-step DAG (50 chains x 3 + aggregate), -j2, median of 5 where repeated");
    let jb_cold = time(d, jb(), &["build", "-j", "2"]);
    let make_cold = time(d, "make", &["-s", "-j2"]);
    let jb_noop = median(
        (0..5)
            .map(|_| time(d, jb(), &["build", "-j", "2"]))
            .collect(),
    );
    let make_noop = median((0..5).map(|_| time(d, "make", &["-s", "-j2"])).collect());
    let mut jb_change = Vec::new();
    let mut make_change = Vec::new();
    for round in 0..5 {
        write(d, "src/in7.txt", &format!("changed input {round}\n"));
        // make decides by mtime; make sure the change is visible to it.
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(
            ran_steps(d),
            4,
            "one input change reruns its chain (3) and the aggregate"
        );
        jb_change.push(time(d, jb(), &["build", "-j", "2"]));
        make_change.push(time(d, "make", &["-s", "-j2"]));
    }
    // A change whose effect vanishes downstream: `c` keeps 8 characters of the reversed line.
    write(d, "src/in7.txt", "XXchanged input 4\n");
    let cutoff_plan = ran_steps(d);
    let t0 = Instant::now();
    let out = Command::new(jb())
        .args(["build", "--json"])
        .current_dir(d)
        .output()
        .unwrap();
    let cutoff_ms = t0.elapsed().as_secs_f64() * 1e3;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ran: Vec<String> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["cached"] == false)
        .map(|s| s["step"].as_str().unwrap().to_string())
        .collect();
    // A touch that keeps the content reruns nothing.
    let text = std::fs::read_to_string(d.join("src/in3.txt")).unwrap();
    write(d, "src/in3.txt", &text);
    let touch_plan = ran_steps(d);
    println!(
        "{:<20} {:>9} {:>9} {:>8}   {:>9} {:>9} {:>8}",
        "", "jb wall", "make wall", "jb/make", "jb cpu", "make cpu", "jb/make"
    );
    let row = |name: &str, j: Timing, m: Timing| {
        println!(
            "{name:<20} {:>9.1} {:>9.1} {:>7.2}x   {:>9.1} {:>9.1} {:>7.2}x",
            j.wall,
            m.wall,
            j.wall / m.wall,
            j.cpu,
            m.cpu,
            j.cpu / m.cpu
        );
    };
    println!("(milliseconds; cpu: user + system of the command and its children)");
    row("cold", jb_cold, make_cold);
    row("no-op", jb_noop, make_noop);
    row("one input changed", median(jb_change), median(make_change));
    println!("touch, same content: {touch_plan} steps would run");
    println!(
        "early cutoff: planned {cutoff_plan} (a, then unknown), ran {ran:?} in {cutoff_ms:.1} ms"
    );

    // The repository's default graph, no-op, at `JB_BENCH_SCALE` (default tiny).
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scale = std::env::var("JB_BENCH_SCALE").unwrap_or_else(|_| "tiny".into());
    let plan = Command::new(jb())
        .args(["build", "all", "--scale", &scale, "--dry-run", "--json"])
        .current_dir(repo)
        .output()
        .unwrap();
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&plan.stdout) else {
        println!(
            "repository graph: no plan ({})",
            String::from_utf8_lossy(&plan.stderr).trim()
        );
        return;
    };
    let steps = v.as_array().map(Vec::len).unwrap_or(0);
    let to_run = v
        .as_array()
        .map(|a| a.iter().filter(|s| s["action"] == "run").count())
        .unwrap_or(0);
    if to_run > 0 {
        println!("repository graph: {to_run} of {steps} steps not cached; run `jb build all --scale {scale}` first for the no-op figure");
        return;
    }
    let t = median(
        (0..7)
            .map(|_| time(repo, jb(), &["build", "all", "--scale", &scale]))
            .collect(),
    );
    let python_started = Command::new("sh")
        .args(["-c", &format!("strace -f -e trace=execve -o /dev/stdout {} build all --scale {scale} 2>/dev/null | grep -c 'python' || true", jb())])
        .current_dir(repo)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    println!(
        "repository default graph: {steps} steps, no-op `jb build all --scale {scale}` median {:.1} ms wall, {:.1} ms cpu (execve of python seen: {python_started})",
        t.wall, t.cpu
    );
}
