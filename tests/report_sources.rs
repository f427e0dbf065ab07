//! Where the report's methods come from (issue 27 items 3, 4 and the report's scale): every
//! kernel `jb eval` judged is its own row (its name, its status), agent studies of the run
//! database are methods (a rerun counts once), and one scale is reported at a time.

mod common;
#[path = "common/fixture.rs"]
mod fixture;

use common::TestProject;
use jb::agent::store::{RunInfo, SampleRow, Store};
use jb::project::Project;
use jb::report;
use serde_json::json;

fn project_of(p: &TestProject) -> Project {
    Project::discover(p.path(), Some(p.path()), None, None).unwrap()
}

const W: &str = "12p_RMSNorm";

/// The sequence: `jb eval` of a correct file, then of a file whose export fails.
fn two_evals(p: &TestProject) -> fixture::Fixture<'_> {
    fixture::write_project(p);
    p.write("scratch/good.py", "# correct\n");
    p.write("scratch/broken.py", "# syntax error\n");
    let mut f = fixture::Fixture::new(p);
    let wl = format!("workloads/{W}/workload.py");
    let id = |s: &str| format!("jb-eval/{s}[workload={W}]");
    let good = [wl.as_str(), "scratch/good.py"];
    f.put(
        &id("export"),
        "export",
        "ok",
        json!({"trust": "artifact"}),
        &good,
        &[],
    );
    f.put(
        &id("compile"),
        "compile",
        "ok",
        json!({"cost": {"flops": 1e9, "bytes_accessed": 1e9}, "has_pallas_call": true, "trust": "artifact"}),
        &good,
        &[],
    );
    f.put(
        &id("verify"),
        "verify",
        "correct",
        json!({"max_abs_err": 1e-4, "trust": "artifact"}),
        &good,
        &[],
    );
    f.put(
        &id("profile"),
        "profile",
        "ok",
        json!({"median_ms": 0.5, "samples_ms": [0.5, 0.5, 0.5], "trust": "artifact"}),
        &good,
        &[],
    );
    let broken = [wl.as_str(), "scratch/broken.py"];
    f.put(
        &id("export"),
        "export",
        "compile_error",
        json!({"error": "SyntaxError"}),
        &broken,
        &[],
    );
    f
}

#[test]
fn every_jb_eval_kernel_is_its_own_row() {
    let p = TestProject::new();
    let f = two_evals(&p);
    let r = report::from_cache(&f.cache, Some(&project_of(&p))).unwrap();
    let row = r.workloads.iter().find(|w| w.workload == W).unwrap();
    let rows: Vec<(&str, &str, Option<f64>)> = row
        .candidates
        .iter()
        .map(|c| (c.label.as_str(), c.status.as_str(), c.median_ms))
        .collect();
    // Before: one row, `good.py` with the broken file's `compile_error`, no timing.
    assert_eq!(
        rows,
        [
            ("good.py", "correct", Some(0.5)),
            ("broken.py", "compile_error", None)
        ]
    );
    // The correct kernel is the workload's best.
    assert_eq!(row.best.as_ref().and_then(|b| b.median_ms), Some(0.5));
}

#[test]
fn an_edited_file_is_a_second_row() {
    let p = TestProject::new();
    let mut f = two_evals(&p);
    p.write("scratch/good.py", "# correct, edited\n");
    let good = [
        format!("workloads/{W}/workload.py"),
        "scratch/good.py".into(),
    ];
    let good: Vec<&str> = good.iter().map(String::as_str).collect();
    f.put(
        &format!("jb-eval/export[workload={W}]"),
        "export",
        "rejected",
        json!({}),
        &good,
        &[],
    );
    let r = report::from_cache(&f.cache, Some(&project_of(&p))).unwrap();
    let row = r.workloads.iter().find(|w| w.workload == W).unwrap();
    let statuses: Vec<&str> = row.candidates.iter().map(|c| c.status.as_str()).collect();
    assert_eq!(statuses, ["correct", "compile_error", "rejected"]);
    let labels: Vec<&str> = row.candidates.iter().map(|c| c.label.as_str()).collect();
    assert!(labels[0].starts_with("good.py @"), "{labels:?}");
    assert!(
        labels[2].starts_with("good.py @") && labels[2] != labels[0],
        "{labels:?}"
    );
}

fn row(w: &str, number: usize, outcome: &str, speedup: Option<f64>) -> SampleRow {
    SampleRow {
        workload: w.into(),
        number,
        tag: format!("s{number}"),
        chain: None,
        step: 0,
        phase: "sample".into(),
        parent: None,
        outcome: outcome.into(),
        eval_status: match outcome {
            "correct_faster" | "correct_slower" => Some("correct".into()),
            "no_code" => None,
            o => Some(o.into()),
        },
        speedup,
        best_so_far: speedup,
        kernel_ms: speedup.map(|s| 1.0 / s),
        xla_ms: Some(1.0),
        translate_key: None,
        response_cached: false,
        candidate: None,
    }
}

fn study(store: &Store, name: &str, rows: &[SampleRow]) {
    let id = store
        .start_run(&RunInfo {
            name: name.into(),
            method: name.into(),
            agent: json!({}),
            params: json!({}),
            workloads: vec![W.into()],
        })
        .unwrap();
    store.add_samples(id, rows).unwrap();
    store
        .finish_run(id, "ok", 1, 0, &json!({}), &json!([]))
        .unwrap();
}

#[test]
fn agent_studies_are_methods_and_a_rerun_counts_once() {
    let p = TestProject::new();
    let f = fixture::populate(&p);
    let before = report::from_cache(&f.cache, Some(&project_of(&p))).unwrap();
    let n_before = before.methods.len();
    let store = Store::open(&f.cache.dir).unwrap();
    study(
        &store,
        "best-of-n",
        &[row(W, 0, "incorrect", None), row(W, 1, "no_code", None)],
    );
    study(&store, "iterative", &[row(W, 0, "compile_error", None)]);
    // The best-of-n study run again: its newest run is the one reported.
    study(
        &store,
        "best-of-n",
        &[
            row(W, 0, "incorrect", None),
            row(W, 1, "correct_faster", Some(2.0)),
            row(W, 2, "runtime_error", None),
        ],
    );
    let r = report::from_cache(&f.cache, Some(&project_of(&p))).unwrap();
    assert_eq!(r.methods.len(), n_before + 2, "{:?}", r.methods);
    let m = r.methods.iter().find(|m| m.name == "best-of-n").unwrap();
    assert_eq!((m.samples, m.correct), (3, 1));
    let it = r.methods.iter().find(|m| m.name == "iterative").unwrap();
    assert_eq!((it.samples, it.correct), (1, 0));
    assert!(
        report::markdown::summary_line(&r).contains(&format!("{} method(s)", n_before + 2)),
        "{}",
        report::markdown::summary_line(&r)
    );
    // The correct agent sample is a candidate of the workload's row.
    let w = r.workloads.iter().find(|w| w.workload == W).unwrap();
    assert!(w
        .candidates
        .iter()
        .any(|c| c.method == "best-of-n" && c.status == "correct"));
}

#[test]
fn one_scale_at_a_time() {
    let p = TestProject::new();
    fixture::write_project(&p);
    let mut f = fixture::Fixture::new(&p);
    let wl = format!("workloads/{W}/workload.py");
    let id = format!("baseline/profile[workload={W}]");
    f.put(
        &id,
        "profile",
        "ok",
        json!({"median_ms": 7.0, "samples_ms": [7.0]}),
        &[&wl],
        &[],
    );
    // A second record of the step at another scale (the fixture writes `paper`).
    let mut rec = f
        .cache
        .db
        .latest_records("baseline/profile")
        .unwrap()
        .remove(0);
    rec.components.set("scale", "tiny");
    rec.key = rec.components.key();
    rec.result["median_ms"] = json!(0.01);
    rec.created_at += 10.0;
    f.cache.db.put_action(&rec).unwrap();
    let ms = |r: &report::Report| {
        r.workloads
            .iter()
            .find(|w| w.workload == W)
            .and_then(|w| w.xla.as_ref())
            .and_then(|t| t.median_ms)
    };
    let pr = Some(&project_of(&p));
    let paper = report::from_cache_at(&f.cache, pr, Some("paper")).unwrap();
    assert_eq!(ms(&paper), Some(7.0));
    assert_eq!(paper.scales, ["paper"]);
    assert!(
        paper.notes.iter().any(|n| n.contains("tiny (1 steps)")),
        "{:?}",
        paper.notes
    );
    let tiny = report::from_cache_at(&f.cache, pr, Some("tiny")).unwrap();
    assert_eq!(ms(&tiny), Some(0.01));
    // Without --scale: the newest result's scale.
    let newest = report::from_cache_at(&f.cache, pr, None).unwrap();
    assert_eq!(newest.scales, ["tiny"]);
    // Through the binary.
    let out = p.jb(&["report", "--scale", "paper", "--out", "-", "-f", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["scales"], json!(["paper"]));
}
