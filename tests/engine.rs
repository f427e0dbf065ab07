//! The engine with a fake executor: no processes, no Python.

use std::sync::Arc;
use std::time::Duration;

use jb::cache::Cache;
use jb::engine::{closure_in_order, BuildOptions, Engine, KeyContext};
use jb::exec::fake::{FakeBehavior, FakeExecutor};
use jb::pipeline::{expand, load_pipelines, ExpandContext, PipelineSet};
use jb::project::Project;
use serde_json::json;

struct Fixture {
    _dir: tempfile::TempDir,
    project: Arc<Project>,
    fake: Arc<FakeExecutor>,
    cache: Arc<Cache>,
}

impl Fixture {
    fn new(yaml: &str, files: &[(&str, &str)]) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("pipelines")).unwrap();
        std::fs::write(dir.path().join("pipelines/p.yaml"), yaml).unwrap();
        for (rel, text) in files {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let project = Arc::new(Project::discover(dir.path(), None, None, None).unwrap());
        let cache = Arc::new(Cache::open(&project.cache_dir).unwrap());
        Fixture {
            _dir: dir,
            project,
            fake: Arc::new(FakeExecutor::new()),
            cache,
        }
    }

    fn set(&self) -> PipelineSet {
        let ctx = ExpandContext {
            scale: "tiny".into(),
            backend: "cpu".into(),
        };
        expand(&self.project, load_pipelines(&self.project).unwrap(), &ctx).unwrap()
    }

    fn engine(&self) -> Engine {
        Engine {
            project: self.project.clone(),
            cache: self.cache.clone(),
            executor: self.fake.clone(),
            ctx: KeyContext {
                scale: "tiny".into(),
                ..Default::default()
            },
            backend: "cpu".into(),
        }
    }

    fn build(&self, opts: &BuildOptions) -> jb::engine::BuildSummary {
        self.fake.clear_log();
        let set = self.set();
        let all: Vec<usize> = (0..set.steps.len()).collect();
        let order = closure_in_order(&set, &all);
        self.engine().build(&set, &order, opts).unwrap()
    }
}

const GRID: &str = r#"
steps:
  compile:
    kind: compile
    foreach:
      - match: "w/{workload}/space.yaml"
      - grid: "w/{workload}/space.yaml"
    params: {config: "{config_params}", w: "{workload}"}
  profile:
    kind: profile
    foreach:
      - match: "w/{workload}/space.yaml"
      - grid: "w/{workload}/space.yaml"
    params: {config: "{config_params}", w: "{workload}"}
    needs: [compile]
  best:
    kind: grid
    foreach:
      - match: "w/{workload}/space.yaml"
    needs: [profile]
"#;

const SPACE: &str =
    "defaults: {bm: 8}\nspace:\n  tiny: {params: {bm: [4, 8, 16]}, filter: \"bm >= 8\"}\n";

#[test]
fn grid_expansion_joins_per_config_and_ranks() {
    let f = Fixture::new(
        GRID,
        &[("w/1p_x/space.yaml", SPACE), ("w/2p_y/space.yaml", SPACE)],
    );
    f.fake.on(
        "p/profile[workload=1p_x,config=bm=8]",
        FakeBehavior::Output(json!({"status": "ok", "median_ms": 2.0})),
    );
    f.fake.on(
        "p/profile[workload=1p_x,config=bm=16]",
        FakeBehavior::Output(json!({"status": "ok", "median_ms": 1.0})),
    );
    f.fake.on(
        "p/compile[workload=2p_y,config=bm=16]",
        FakeBehavior::Fail("invalid".into()),
    );
    f.fake.on(
        "p/profile[workload=2p_y,config=bm=8]",
        FakeBehavior::Output(json!({"status": "ok", "median_ms": 3.0})),
    );
    let set = f.set();
    assert_eq!(
        set.steps.len(),
        2 * 2 + 2 * 2 + 2,
        "filter keeps bm 8 and 16 per workload"
    );
    let best = set
        .steps
        .iter()
        .find(|s| s.id == "p/best[workload=1p_x]")
        .unwrap();
    assert_eq!(
        best.deps.len(),
        2,
        "grid joins only its workload's profiles"
    );
    let s = f.build(&BuildOptions::default());
    assert_eq!(s.failed, 0, "{:#?}", s.steps);
    let get = |id: &str| s.steps.iter().find(|r| r.step == id).unwrap().clone();
    assert_eq!(
        get("p/best[workload=1p_x]").result["best"]["config"],
        "bm=16"
    );
    assert_eq!(
        get("p/best[workload=1p_x]").result["best"]["params"]["bm"],
        16
    );
    let y = get("p/best[workload=2p_y]");
    assert_eq!(y.result["best"]["config"], "bm=8");
    assert_eq!(
        get("p/profile[workload=2p_y,config=bm=16]").status,
        "invalid",
        "invalid configs propagate, not fail"
    );
    assert_eq!(y.result["invalid"][0]["config"], "bm=16");
}

#[test]
fn adding_a_grid_point_runs_only_that_point() {
    let f = Fixture::new(GRID, &[("w/1p_x/space.yaml", SPACE)]);
    f.build(&BuildOptions::default());
    std::fs::write(
        f.project.root.join("w/1p_x/space.yaml"),
        SPACE.replace("[4, 8, 16]", "[4, 8, 16, 32]"),
    )
    .unwrap();
    f.build(&BuildOptions::default());
    let mut log = f.fake.executed();
    log.sort();
    assert_eq!(
        log,
        [
            "p/best[workload=1p_x]",
            "p/compile[workload=1p_x,config=bm=32]",
            "p/profile[workload=1p_x,config=bm=32]"
        ]
    );
}

#[test]
fn infrastructure_failures_are_not_cached_but_results_are() {
    let f = Fixture::new(
        "steps:\n  a:\n    kind: compile\n  b:\n    kind: compile\n    params: {x: 1}\n",
        &[],
    );
    f.fake.on("p/a", FakeBehavior::Crash);
    f.fake.on("p/b", FakeBehavior::Fail("compile_error".into()));
    let opts = BuildOptions {
        keep_going: true,
        ..Default::default()
    };
    let s = f.build(&opts);
    assert_eq!(s.failed, 2);
    f.build(&opts);
    assert_eq!(
        f.fake.executed(),
        ["p/a"],
        "the crash reruns, the compile error is a cached result"
    );
}

#[test]
fn remeasure_accumulates_samples() {
    let f = Fixture::new("steps:\n  prof:\n    kind: profile\n", &[]);
    f.fake.on(
        "p/prof",
        FakeBehavior::Output(
            json!({"status": "ok", "median_ms": 1.0, "samples_ms": [1.0, 1.0, 3.0]}),
        ),
    );
    f.build(&BuildOptions::default());
    f.build(&BuildOptions::default());
    assert!(f.fake.executed().is_empty());
    let s = f.build(&BuildOptions {
        remeasure: true,
        ..Default::default()
    });
    assert_eq!(f.fake.executed(), ["p/prof"]);
    assert_eq!(s.steps[0].result["measurements"], 2);
    assert_eq!(s.steps[0].result["pooled_samples"], 6);
    let key = &s.steps[0].key;
    assert_eq!(f.cache.db.samples(key).unwrap().len(), 6);
}

#[test]
fn measurements_never_overlap_and_jobs_run_in_parallel() {
    let mut yaml = String::from("steps:\n");
    for i in 0..4 {
        yaml.push_str(&format!("  c{i}:\n    kind: compile\n    params: {{i: {i}}}\n  m{i}:\n    kind: profile\n    params: {{i: {i}}}\n"));
    }
    let f = Fixture::new(&yaml, &[]);
    for i in 0..4 {
        f.fake.on(
            &format!("p/c{i}"),
            FakeBehavior::Sleep(Duration::from_millis(150)),
        );
        f.fake.on(
            &format!("p/m{i}"),
            FakeBehavior::Sleep(Duration::from_millis(50)),
        );
    }
    let s = f.build(&BuildOptions {
        jobs: 4,
        exclusive_measurements: true,
        ..Default::default()
    });
    assert_eq!(s.failed, 0, "{:#?}", s.steps);
    assert_eq!(f.fake.executed().len(), 8, "{:?}", f.fake.executed());
}

#[test]
fn dry_run_says_blocked_where_the_build_skips() {
    let f = Fixture::new(
        "steps:\n  c:\n    kind: compile\n  v:\n    kind: verify\n    needs: [c]\n",
        &[],
    );
    f.fake.on("p/c", FakeBehavior::Fail("compile_error".into()));
    let s = f.build(&BuildOptions {
        keep_going: true,
        ..Default::default()
    });
    assert_eq!(s.steps[1].status, jb::exec::StepStatus::Skipped);
    let set = f.set();
    let all: Vec<usize> = (0..set.steps.len()).collect();
    let plan = f
        .engine()
        .plan(&set, &closure_in_order(&set, &all), false)
        .unwrap();
    assert_eq!(plan[0].action, jb::engine::PlanAction::Cached);
    assert_eq!(plan[1].action, jb::engine::PlanAction::Blocked, "{plan:?}");
    assert_eq!(plan[1].reason, "upstream p/c is compile_error");
}

#[test]
fn a_no_op_build_writes_one_run_row_and_nothing_else() {
    let f = Fixture::new(
        "steps:\n  a:\n    kind: compile\n  b:\n    kind: verify\n    needs: [a]\n",
        &[],
    );
    f.build(&BuildOptions::default());
    let before = f.cache.db.counts().unwrap();
    let s = f.build(&BuildOptions::default());
    assert_eq!(s.cached, 2);
    let after = f.cache.db.counts().unwrap();
    for (table, n) in &before {
        let expected = n + i64::from(table == "runs");
        assert_eq!(after[table], expected, "{table}: {before:?} -> {after:?}");
    }
}

/// Counts executions running at once (across every engine sharing it).
#[derive(Default)]
struct Overlap {
    active: std::sync::atomic::AtomicUsize,
    max: std::sync::atomic::AtomicUsize,
    runs: std::sync::atomic::AtomicUsize,
}

impl jb::exec::Executor for Overlap {
    fn execute(&self, _req: &jb::exec::StepRequest) -> jb::exec::StepOutput {
        use std::sync::atomic::Ordering::SeqCst;
        let now = self.active.fetch_add(1, SeqCst) + 1;
        self.max.fetch_max(now, SeqCst);
        self.runs.fetch_add(1, SeqCst);
        std::thread::sleep(Duration::from_millis(80));
        self.active.fetch_sub(1, SeqCst);
        jb::exec::StepOutput::new("ok", json!({"median_ms": 1.0, "samples_ms": [1.0]}))
    }
}

/// Two builds on one cache (as two processes would: each opens the cache itself), each with
/// its own engine, run concurrently.
fn two_builds(f: &Fixture, exec: Arc<Overlap>, opts: BuildOptions) {
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let project = f.project.clone();
            let exec = exec.clone();
            let set = f.set();
            let opts = opts.clone();
            std::thread::spawn(move || {
                let engine = Engine {
                    cache: Arc::new(Cache::open(&project.cache_dir).unwrap()),
                    project,
                    executor: exec,
                    ctx: KeyContext {
                        scale: "tiny".into(),
                        ..Default::default()
                    },
                    backend: "cpu".into(),
                };
                let all: Vec<usize> = (0..set.steps.len()).collect();
                let s = engine
                    .build(&set, &closure_in_order(&set, &all), &opts)
                    .unwrap();
                assert_eq!(s.failed, 0, "{:?}", s.steps);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn measurements_of_two_builds_never_overlap() {
    let mut yaml = String::from("steps:\n");
    for i in 0..3 {
        yaml.push_str(&format!(
            "  m{i}:\n    kind: profile\n    params: {{i: {i}}}\n"
        ));
    }
    let f = Fixture::new(&yaml, &[]);
    let exec = Arc::new(Overlap::default());
    // Different salts: the two builds measure different keys, so only the device locks keep
    // them apart.
    let threads: Vec<_> = (0..2)
        .map(|b| {
            let project = f.project.clone();
            let exec = exec.clone();
            let set = f.set();
            std::thread::spawn(move || {
                let engine = Engine {
                    cache: Arc::new(Cache::open(&project.cache_dir).unwrap()),
                    project,
                    executor: exec,
                    ctx: KeyContext {
                        scale: "tiny".into(),
                        salt: Some(format!("build-{b}")),
                        ..Default::default()
                    },
                    backend: "cpu".into(),
                };
                let all: Vec<usize> = (0..set.steps.len()).collect();
                let opts = BuildOptions {
                    jobs: 3,
                    devices: 3,
                    ..Default::default()
                };
                engine
                    .build(&set, &closure_in_order(&set, &all), &opts)
                    .unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(exec.runs.load(std::sync::atomic::Ordering::SeqCst), 6);
    assert!(
        exec.max.load(std::sync::atomic::Ordering::SeqCst) <= 3,
        "at most one measurement per device unit"
    );
}

#[test]
fn concurrent_builds_wait_for_an_identical_in_flight_step() {
    let mut yaml = String::from("steps:\n");
    for i in 0..4 {
        yaml.push_str(&format!(
            "  c{i}:\n    kind: compile\n    params: {{i: {i}}}\n"
        ));
    }
    let f = Fixture::new(&yaml, &[]);
    let exec = Arc::new(Overlap::default());
    two_builds(
        &f,
        exec.clone(),
        BuildOptions {
            jobs: 4,
            ..Default::default()
        },
    );
    assert_eq!(
        exec.runs.load(std::sync::atomic::Ordering::SeqCst),
        4,
        "each step ran once across both builds"
    );
}

const DEVICE_STEPS: &str = r#"
steps:
  export:
    kind: export
    foreach: [{values: {w: [a, b, c, d]}}]
    params: {w: "{w}"}
  compile:
    kind: compile
    foreach: [{values: {w: [a, b, c, d]}}]
    params: {w: "{w}"}
    needs: [export]
  profile:
    kind: profile
    foreach: [{values: {w: [a, b, c, d]}}]
    params: {w: "{w}"}
    needs: [compile]
  note:
    kind: command
    run: "true"
"#;

#[test]
fn on_an_accelerator_every_backend_step_holds_one_device_and_export_none() {
    let f = Fixture::new(DEVICE_STEPS, &[]);
    for kind in ["p/compile", "p/profile", "p/export"] {
        f.fake
            .on(kind, FakeBehavior::Sleep(Duration::from_millis(30)));
    }
    let opts = BuildOptions {
        jobs: 8,
        devices: 2,
        device_bound: true,
        ..Default::default()
    };
    let summary = f.build(&opts);
    assert_eq!(summary.failed, 0);
    let seen = f.fake.devices.lock().unwrap().clone();
    assert_eq!(seen.len(), 13);
    for (id, dev) in &seen {
        if id.starts_with("p/compile") || id.starts_with("p/profile") {
            assert!(matches!(dev, Some(0 | 1)), "{id}: {dev:?}");
        } else {
            assert_eq!(*dev, None, "{id} opens no device");
        }
    }
    assert_eq!(f.fake.max_per_device(), 1, "one judge per device at a time");
    // On the CPU backend only measurements hold the device.
    let f = Fixture::new(DEVICE_STEPS, &[]);
    let opts = BuildOptions {
        jobs: 8,
        ..Default::default()
    };
    f.build(&opts);
    for (id, dev) in f.fake.devices.lock().unwrap().iter() {
        assert_eq!(dev.is_some(), id.starts_with("p/profile"), "{id}: {dev:?}");
    }
}

#[test]
fn a_published_peak_is_in_profile_keys_and_reaches_the_executor() {
    // Steps without upstreams: a dry run knows every key.
    let f = Fixture::new(
        "steps:\n  compile: {kind: compile, params: {w: a}}\n  profile: {kind: profile, params: {w: a}}\n",
        &[],
    );
    let keys = |peak: Option<serde_json::Value>| {
        let mut engine = f.engine();
        engine.ctx.peak = peak;
        let set = f.set();
        let all: Vec<usize> = (0..set.steps.len()).collect();
        engine
            .plan(&set, &closure_in_order(&set, &all), false)
            .unwrap()
            .into_iter()
            .map(|e| (e.step, e.key))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let published = json!({"flops_per_s": 1e15, "bytes_per_s": 4.8e12, "source": "published", "device": "H200"});
    let other = json!({"flops_per_s": 2e15, "bytes_per_s": 4.8e12, "source": "published", "device": "B200"});
    let measured =
        json!({"flops_per_s": 1e11, "bytes_per_s": 1e10, "source": "measured", "device": "cpu"});
    let (none, a, b, m) = (
        keys(None),
        keys(Some(published.clone())),
        keys(Some(other)),
        keys(Some(measured)),
    );
    assert_eq!(none.len(), 2);
    for (step, key) in &none {
        assert!(key.is_some(), "{step}");
        let judged = step.starts_with("p/profile");
        assert_eq!(a[step] != *key, judged, "{step}: published peak in the key");
        assert_eq!(
            a[step] != b[step],
            judged,
            "{step}: another peak, another key"
        );
        assert_eq!(m[step], *key, "{step}: a measured peak is not in keys");
    }
    // Whatever the executor is, a profile request carries the peak.
    let mut engine = f.engine();
    engine.ctx.peak = Some(published.clone());
    f.fake
        .on("p/profile", FakeBehavior::Output(json!({"status": "ok"})));
    let set = f.set();
    let all: Vec<usize> = (0..set.steps.len()).collect();
    engine
        .build(
            &set,
            &closure_in_order(&set, &all),
            &BuildOptions::default(),
        )
        .unwrap();
    let peaks = f.fake.peaks.lock().unwrap().clone();
    assert!(peaks
        .iter()
        .filter(|(id, _)| id.starts_with("p/profile"))
        .all(|(_, p)| p.as_ref() == Some(&published)));
}

#[test]
fn a_broken_pipeline_file_is_skipped_by_commands_that_do_not_need_it() {
    let f = Fixture::new(
        "steps:\n  a:\n    kind: command\n    run: echo hi\n    outputs: [out.txt]\n",
        &[("pipelines/zz_broken.yaml", "steps:\n  - id: [broken\n")],
    );
    // `jb build` refuses the project, naming the file and line.
    let strict = load_pipelines(&f.project).unwrap_err().to_string();
    assert!(strict.contains("zz_broken.yaml:2"), "{strict}");
    // `jb eval` / `jb agent` (generated pipelines) go on with the others.
    let (ok, broken) = jb::pipeline::load_pipelines_skipping_broken(&f.project).unwrap();
    assert_eq!(
        ok.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["p"]
    );
    assert_eq!(broken.len(), 1);
    assert!(
        broken[0].to_string().contains("zz_broken.yaml:2"),
        "{}",
        broken[0]
    );
}
