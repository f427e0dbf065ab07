//! Steps computed in jb itself from upstream results: `grid` (rank a search) and `aggregate`.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::results::{typed, ProfileResult};
use super::{DepResult, StepOutput, StepRequest, StepStatus};
use crate::pipeline::template::var_string;

/// Rank the configurations of a grid search by median time and keep the best. Upstream steps
/// are the per-configuration steps (joined on the variable `config`); a configuration counts
/// when its profile is `ok` and none of its other steps (verify) failed.
pub fn grid(req: &StepRequest) -> StepOutput {
    #[derive(Default)]
    struct Cfg {
        params: Value,
        statuses: BTreeMap<String, StepStatus>,
        median_ms: Option<f64>,
        reasons: Vec<String>,
    }
    let mut by_config: BTreeMap<String, Cfg> = BTreeMap::new();
    for d in &req.deps {
        let Some(name) = d.vars.get("config").map(var_string) else {
            continue;
        };
        let c = by_config.entry(name).or_default();
        if let Some(p) = d.vars.get("config_params") {
            c.params = p.clone();
        }
        c.statuses.insert(d.kind.clone(), d.status);
        if d.kind == "profile" && d.status == StepStatus::Ok {
            c.median_ms = typed::<ProfileResult>(&d.result).and_then(|p| p.median_ms);
        }
        if let Some(rs) = d.result.get("reasons").and_then(Value::as_array) {
            c.reasons.extend(
                rs.iter()
                    .filter_map(Value::as_str)
                    .map(|s| format!("{}: {s}", d.kind)),
            );
        }
    }
    let mut ranked = Vec::new();
    let mut invalid = Vec::new();
    let mut failed = Vec::new();
    let mut unsupported = Vec::new();
    for (name, c) in &by_config {
        let bad = c.statuses.values().find(|s| !s.is_success());
        match (bad, c.median_ms) {
            (None, Some(ms)) => ranked.push(json!({"config": name, "params": c.params, "median_ms": ms})),
            (Some(StepStatus::Invalid), _) => invalid.push(json!({"config": name, "reasons": c.reasons})),
            (Some(StepStatus::Unsupported), _) => unsupported.push(json!({"config": name, "reasons": c.reasons})),
            (s, _) => failed.push(json!({"config": name, "status": s.map_or("no timing", |s| s.as_str()), "reasons": c.reasons})),
        }
    }
    ranked.sort_by(|a, b| {
        let x = a["median_ms"].as_f64().unwrap_or(f64::INFINITY);
        let y = b["median_ms"].as_f64().unwrap_or(f64::INFINITY);
        x.total_cmp(&y)
    });
    let summary = json!({
        "tried": by_config.len(),
        "valid": ranked.len(),
        "invalid": invalid,
        "failed": failed,
        "unsupported": unsupported,
        "ranked": ranked,
    });
    let mut result = summary;
    let status = if let Some(best) = result["ranked"].get(0).cloned() {
        result["best"] = best;
        StepStatus::Ok
    } else if !result["unsupported"]
        .as_array()
        .is_none_or(|a| a.is_empty())
    {
        result["reasons"] = json!(["every configuration is unsupported on this backend"]);
        StepStatus::Unsupported
    } else {
        result["reasons"] =
            json!(["no configuration compiled, verified and profiled successfully"]);
        StepStatus::Failed
    };
    StepOutput::new(status, result)
}

/// The report of the upstream results: status counts and headline numbers in the result, and
/// the report files (`params.formats`: md, csv, json, html; default all) kept as the step's
/// files. The environment and device peak come from the cache's fingerprint.json and peak.json
/// (upstream results seen here do not carry their key components; `jb report` reads those from
/// the run database).
pub fn aggregate(req: &StepRequest) -> StepOutput {
    use crate::report::{self, methods, Format, RecordSet, ReportInput};

    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut rows = Vec::new();
    for DepResult {
        step_id,
        kind,
        status,
        result,
        vars,
        ..
    } in &req.deps
    {
        *counts.entry(status.to_string()).or_default() += 1;
        rows.push(json!({
            "step": step_id,
            "kind": kind,
            "workload": vars.get("workload"),
            "status": status,
            "median_ms": result.get("median_ms"),
        }));
    }
    let formats: Vec<Format> = match req.step.params.get("formats") {
        Some(Value::Array(a)) => {
            let mut out = Vec::new();
            for f in a {
                match f.as_str().map(Format::parse) {
                    Some(Ok(f)) => out.push(f),
                    _ => {
                        return StepOutput::new(
                            StepStatus::Failed,
                            json!({"reasons": [format!("params.formats: unknown format {f} (md, csv, json, html)")]}),
                        )
                    }
                }
            }
            out
        }
        _ => Format::ALL.to_vec(),
    };
    let records = RecordSet::from_deps(&req.deps);
    let methods = match methods::load_all(&methods::default_sources(), &records, None) {
        Ok(m) => m,
        Err(e) => return StepOutput::infra(StepStatus::Error, format!("report: {e}")),
    };
    let cache_dir = &req.project.cache_dir;
    let input = ReportInput {
        records,
        methods,
        declared_workloads: Vec::new(),
        declared_handtuned: Vec::new(),
        fallback_env: report::cached_fingerprint(cache_dir),
        fallback_peak: report::cached_peak(cache_dir),
    };
    let built = report::build(&input);
    let mut out_files = BTreeMap::new();
    for f in formats {
        let written = report::render(&built, f).and_then(|files| {
            report::write(&req.out_dir, &files)?;
            Ok(files)
        });
        match written {
            Ok(files) => {
                for file in files {
                    out_files.insert(file.path.clone(), req.out_dir.join(&file.path));
                }
            }
            Err(e) => return StepOutput::infra(StepStatus::Error, format!("report: {e}")),
        }
    }
    let methods: Vec<Value> = built
        .methods
        .iter()
        .map(|m| json!({"name": m.name, "geomean": m.geomean, "mean": m.mean, "correct": m.correct, "benchmarks": m.benchmarks}))
        .collect();
    let mut out = StepOutput::new(
        StepStatus::Ok,
        json!({"counts": counts, "rows": rows, "workloads": built.workloads.len(), "methods": methods}),
    );
    out.files = out_files;
    out
}
