//! Reports from fixed records (no Python): the Markdown and CSV against reviewed snapshots, the
//! paper's statistics, the self-contained HTML, the CLI, and the `aggregate` step.

mod common;
#[path = "common/fixture.rs"]
mod fixture;

use std::sync::Arc;

use common::TestProject;
use jb::project::Project;
use jb::report::{self, Format};

fn project_of(p: &TestProject) -> Project {
    Project::discover(p.path(), Some(p.path()), None, None).unwrap()
}

fn content(files: &[report::File], path: &str) -> String {
    files
        .iter()
        .find(|f| f.path == path)
        .unwrap_or_else(|| panic!("no {path}"))
        .content
        .clone()
}

#[test]
fn report_from_fixed_records_matches_snapshot() {
    let p = TestProject::new();
    let f = fixture::populate(&p);
    let r = report::from_cache(&f.cache, Some(&project_of(&p))).unwrap();
    let md = content(&report::render(&r, Format::Md).unwrap(), "report.md");
    insta::assert_snapshot!("report_md", md);
    let csv = report::render(&r, Format::Csv).unwrap();
    insta::assert_snapshot!("workloads_csv", content(&csv, "workloads.csv"));
    insta::assert_snapshot!("methods_csv", content(&csv, "methods.csv"));
}

#[test]
fn statistics_follow_the_paper() {
    let p = TestProject::new();
    let f = fixture::populate(&p);
    let r = report::from_cache(&f.cache, Some(&project_of(&p))).unwrap();
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9 * b.abs().max(1.0);
    // Every workload of the project is listed, failures and unsupported ones included.
    let status: Vec<(&str, &str)> = r
        .workloads
        .iter()
        .map(|w| (w.workload.as_str(), w.status.as_str()))
        .collect();
    assert_eq!(
        status,
        [
            ("1p_Flash_Attention", "ok"),
            ("5p_Flex_Attention", "runtime_error"),
            ("7p_Ragged_Paged_Attention", "ok"),
            ("8p_GEMM", "ok"),
            ("12p_RMSNorm", "ok"),
            ("19k_Matmul_Subtract_Multiply_ReLU", "not run"),
        ]
    );
    let w7 = &r.workloads[2];
    assert_eq!(w7.handtuned_tuned.as_ref().unwrap().status, "unsupported");
    let w8 = &r.workloads[3];
    assert_eq!(w8.handtuned_default.as_ref().unwrap().status, "invalid");
    // 8p: utilisation against the v6e peak, the paper's way.
    let xla8 = w8.xla.as_ref().unwrap();
    assert!(close(
        xla8.utilisation.unwrap(),
        3.848290697216e12 / 5.36e-3 / 918e12
    ));
    // 12p's `jb eval` one-off is faster on paper, but it was judged in the sandbox (trust not
    // artifact): correct, listed, and with no time, so the best is the eval pipeline's.
    let w12 = &r.workloads[4];
    let best = w12.best.as_ref().unwrap().label.as_deref().unwrap();
    assert!(!best.contains("my_rmsnorm.py"), "{best}");
    let oneoff = w12
        .candidates
        .iter()
        .find(|c| c.label.contains("my_rmsnorm.py"))
        .expect("the jb eval candidate is listed");
    assert_eq!(
        (oneoff.status.as_str(), oneoff.median_ms),
        ("correct", None)
    );

    // Table 2: the candidate files as one method over all 6 benchmarks, then the kernels
    // `jb eval` judged (one here).
    assert_eq!(r.methods.len(), 2);
    assert_eq!(
        (r.methods[1].name.as_str(), r.methods[1].samples),
        ("jb eval", 1)
    );
    let m = &r.methods[0];
    assert_eq!(
        (m.benchmarks, m.attempted, m.samples, m.correct),
        (6, 3, 5, 3)
    );
    let s1: f64 = 25.21 / 9.44;
    let s12: f64 = 1.1385 / 0.9;
    assert!(close(m.geomean.unwrap(), (s1 * s12).powf(1.0 / 6.0)));
    assert!(close(m.mean.unwrap(), (s1 + s12 + 4.0) / 6.0));
    // The paper's fast_p counts point estimates; the fixture has no paired measurement, so
    // nothing has an interval and the interval-based count is 0 everywhere.
    assert!(m.fast_p.iter().all(|f| f.value == Some(0.0)));
    assert_eq!(m.fast1_at_n, [0.0, 0.0]);
    let fp: Vec<f64> = m.fast_p.iter().map(|f| f.point.unwrap()).collect();
    assert_eq!(
        fp,
        [
            3.0 / 6.0,
            3.0 / 6.0,
            2.0 / 6.0,
            2.0 / 6.0,
            1.0 / 6.0,
            1.0 / 6.0
        ]
    );
    assert_eq!(m.fast1_at_n_point, [2.0 / 6.0, 2.0 / 6.0]);

    // Table 3: the three hand-tuned workloads; 7p counts as 1x in the geomean.
    let names: Vec<&str> = r
        .handtuned
        .rows
        .iter()
        .map(|h| h.workload.as_str())
        .collect();
    assert_eq!(
        names,
        ["1p_Flash_Attention", "7p_Ragged_Paged_Attention", "8p_GEMM"]
    );
    assert!(close(
        r.handtuned.geomean_handtuned.unwrap(),
        (25.21f64 / 6.45).powf(1.0 / 3.0)
    ));
    // Every number's record is listed with its key.
    assert!(r
        .sources
        .iter()
        .any(|s| s.step == "tune/best[workload=8p_GEMM]"));
    assert!(r.sources.iter().all(|s| s.key.len() == 64));
}

#[test]
fn html_is_one_self_contained_file() {
    let p = TestProject::new();
    let f = fixture::populate(&p);
    let r = report::from_cache(&f.cache, Some(&project_of(&p))).unwrap();
    let files = report::render(&r, Format::Html).unwrap();
    assert_eq!(files.len(), 1);
    let html = &files[0].content;
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(html.matches("<svg").count(), 4, "four inline plots");
    for external in [
        "<script",
        " src=",
        "href=\"http",
        "<link",
        "<?xml",
        "@import",
    ] {
        assert!(
            !html.contains(external),
            "html refers outside itself: {external}"
        );
    }
    assert!(html.contains("TPU v6e"));
    // A number carries its record's key.
    let key = &r.workloads[3].xla.as_ref().unwrap().key;
    assert!(html.contains(&format!("data-key=\"{key}\"")));
    // Same records, same bytes.
    let again = report::render(
        &report::from_cache(&f.cache, Some(&project_of(&p))).unwrap(),
        Format::Html,
    )
    .unwrap();
    assert_eq!(&again[0].content, html);
}

#[test]
fn cli_writes_every_format_and_prints_one() {
    let p = TestProject::new();
    let f = fixture::populate(&p);
    let lib_md = content(
        &report::render(
            &report::from_cache(&f.cache, Some(&project_of(&p))).unwrap(),
            Format::Md,
        )
        .unwrap(),
        "report.md",
    );
    drop(f);
    let r = p.jb(&["report"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for file in [
        "report.md",
        "report.html",
        "report.json",
        "workloads.csv",
        "methods.csv",
        "fast_p.csv",
        "fast1_at_n.csv",
        "handtuned.csv",
        "sources.csv",
        "plots/roofline.svg",
        "plots/speedup.svg",
        "plots/best_so_far.svg",
        "plots/fast1_at_n.svg",
    ] {
        assert!(p.path().join("cache/report").join(file).is_file(), "{file}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&p.read("cache/report/report.json")).unwrap();
    assert_eq!(json["workloads"].as_array().unwrap().len(), 6);
    let r = p.jb(&["report", "--format", "md", "--out", "-"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, lib_md);
    let r = p.jb(&["report", "--format", "html", "--out", "elsewhere"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(p.path().join("elsewhere/report.html").is_file());
    assert!(!p.path().join("elsewhere/report.md").exists());
    let r = p.jb(&["report", "--format", "csv", "--out", "-"]);
    assert_eq!(r.code, 2, "csv is several files: {}", r.stderr);
}

#[test]
fn empty_database_says_so() {
    let p = TestProject::new();
    let r = p.jb(&["report", "--out", "-"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("No workloads"), "{}", r.stdout);
    assert!(r.stdout.contains("No method results"), "{}", r.stdout);
    assert!(
        r.stdout.contains("No hand-tuned baseline results"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("**Roofline**: _No timed workload"),
        "{}",
        r.stdout
    );
}

#[test]
fn aggregate_step_renders_its_upstream_results() {
    use jb::cache::Cache;
    use jb::engine::{closure_in_order, BuildOptions, Engine, KeyContext};
    use jb::exec::fake::{FakeBehavior, FakeExecutor};
    use jb::pipeline::{expand, load_pipelines, ExpandContext};
    use serde_json::json;

    let p = TestProject::new();
    p.write(
        "pipelines/baseline.yaml",
        "steps:\n  compile:\n    kind: compile\n    foreach: [{match: \"workloads/{workload}/workload.py\"}]\n    params: {w: \"{workload}\"}\n  profile:\n    kind: profile\n    foreach: [{match: \"workloads/{workload}/workload.py\"}]\n    needs: [compile]\n    params: {w: \"{workload}\"}\n",
    );
    p.write(
        "pipelines/report.yaml",
        "default: false\nsteps:\n  aggregate:\n    kind: aggregate\n    needs: [baseline/compile, baseline/profile]\n    params: {formats: [md, json]}\n",
    );
    p.write("workloads/1p_x/workload.py", "CONFIG = {}\n");
    p.write("workloads/2p_y/workload.py", "CONFIG = {}\n");
    let project = Arc::new(project_of(&p));
    let cache = Arc::new(Cache::open(&project.cache_dir).unwrap());
    let fake = Arc::new(FakeExecutor::new());
    fake.on(
        "baseline/profile[workload=1p_x]",
        FakeBehavior::Output(json!({"status": "ok", "median_ms": 2.0, "flops": 4e9, "bytes": 1e9})),
    );
    fake.on(
        "baseline/profile[workload=2p_y]",
        FakeBehavior::Fail("runtime_error".into()),
    );
    let ctx = ExpandContext {
        scale: "tiny".into(),
        backend: "cpu".into(),
    };
    let set = expand(&project, load_pipelines(&project).unwrap(), &ctx).unwrap();
    let all: Vec<usize> = (0..set.steps.len()).collect();
    let order = closure_in_order(&set, &all);
    let engine = Engine {
        project: project.clone(),
        cache: cache.clone(),
        executor: fake.clone(),
        ctx: KeyContext {
            scale: "tiny".into(),
            ..Default::default()
        },
        backend: "cpu".into(),
    };
    let opts = BuildOptions {
        keep_going: true,
        ..Default::default()
    };
    engine.build(&set, &order, &opts).unwrap();
    let (key, _) = cache
        .db
        .latest("report/aggregate")
        .unwrap()
        .expect("aggregate ran");
    let rec = cache.db.get_action(&key).unwrap().unwrap();
    assert_eq!(rec.status, "ok", "{}", rec.result);
    assert_eq!(
        rec.files.keys().map(String::as_str).collect::<Vec<_>>(),
        ["plots/roofline.svg", "report.json", "report.md"]
    );
    let md = String::from_utf8(cache.cas.get(&rec.files["report.md"]).unwrap()).unwrap();
    assert!(md.contains("| 1p_x | ok | 2.000 |"), "{md}");
    assert!(
        md.contains("| 2p_y | runtime_error | runtime_error |"),
        "{md}"
    );
    assert_eq!(rec.result["workloads"], 2);

    // A re-measurement changes only volatile fields (same output digest), yet the report follows.
    fake.on(
        "baseline/profile[workload=1p_x]",
        FakeBehavior::Output(json!({"status": "ok", "median_ms": 1.5, "flops": 4e9, "bytes": 1e9})),
    );
    let opts = BuildOptions {
        keep_going: true,
        remeasure: true,
        ..Default::default()
    };
    engine.build(&set, &order, &opts).unwrap();
    let (key2, _) = cache.db.latest("report/aggregate").unwrap().unwrap();
    assert_ne!(
        key2, key,
        "the aggregate's key follows its upstream measurements"
    );
    let rec = cache.db.get_action(&key2).unwrap().unwrap();
    let md = String::from_utf8(cache.cas.get(&rec.files["report.md"]).unwrap()).unwrap();
    assert!(md.contains("| 1p_x | ok | 1.500 |"), "{md}");
}

#[test]
fn paired_intervals_decide_fast_p_and_show_in_tables_and_plots() {
    let p = TestProject::new();
    let f = fixture::populate(&p);
    let mut input = report::input_from_cache(
        &f.cache,
        Some(&project_of(&p)),
        &report::methods::default_sources(),
    )
    .unwrap();
    // 1p's candidate measured paired: 2.5x [2.4, 2.6]; 12p's: 1.2x [0.95, 1.4] (above 1x as a
    // point, not as an interval).
    let samples = &mut input.methods[0].samples;
    let paired = |point: f64, lo: f64, hi: f64| {
        Some(report::stats::Speedup {
            point,
            ci_low: Some(lo),
            ci_high: Some(hi),
        })
    };
    samples.get_mut("1p_Flash_Attention").unwrap()[0].paired_xla = paired(2.5, 2.4, 2.6);
    samples.get_mut("12p_RMSNorm").unwrap()[0].paired_xla = paired(1.2, 0.95, 1.4);
    let r = report::build(&input);
    let m = &r.methods[0];
    let at = |p: f64| m.fast_p.iter().find(|f| f.p == p).unwrap();
    assert_eq!(at(1.0).value, Some(1.0 / 6.0));
    assert_eq!(at(0.8).value, Some(2.0 / 6.0));
    assert_eq!(at(1.0).point, Some(2.0 / 6.0));
    assert_eq!(m.fast1_at_n[0], 1.0 / 6.0);
    // The paired speedup replaces the ratio of separate measurements, interval included.
    let w1 = r
        .workloads
        .iter()
        .find(|w| w.workload == "1p_Flash_Attention")
        .unwrap();
    assert_eq!(w1.speedups.best_vs_xla, Some(2.5));
    assert_eq!(w1.speedups.best_vs_xla_ci, Some((2.4, 2.6)));
    let md = report::render(&r, report::Format::Md).unwrap();
    let text = content(&md, "report.md");
    assert!(text.contains("2.50x [2.40, 2.60]"), "{text}");
    assert!(text.contains("fast_1 (point)"));
    let plots = report::plots::all(&r).unwrap();
    let speedup = plots.iter().find(|p| p.id == "speedup").unwrap();
    assert!(speedup.caption.contains("95 % interval"));
    assert!(
        speedup.svg.as_deref().unwrap().contains("<polyline")
            || speedup.svg.as_deref().unwrap().contains("<line")
    );
}
