//! The pipeline generated for a candidate: export, compile, verify and a paired profile beside
//! the XLA baseline and, where the workload has one, the hand-tuned kernel.

use std::path::Path;

use serde_json::{json, Value};

use super::result::HandtunedSource;
use super::EvalSettings;
use crate::cache::Cache;
use crate::error::{JbError, Result};
use crate::pipeline::{parse_pipeline, space::load_space, LoadedPipeline};
use crate::project::Project;

/// The hand-tuned configuration at `scale`: the tuned one if `jb tune` found one at this scale,
/// else the published defaults where this scale's search space allows them, else the space's
/// first configuration at this scale (by the spaces' convention the largest blocks, the nearest
/// to the defaults: the paper's 2048-wide blocks do not divide the cpu scale's dimensions).
pub fn handtuned_config(
    project: &Project,
    cache: &Cache,
    workload: &str,
    scale: &str,
) -> Option<(Value, HandtunedSource)> {
    let path = project
        .root
        .join(format!("tokamax_baselines/{workload}/space.yaml"));
    if !path.is_file() {
        return None;
    }
    if let Ok(Some((key, comps))) = cache.db.latest(&format!("tune/best[workload={workload}]")) {
        let same_scale = comps.0.get("scale").is_none_or(|s| s == scale);
        if let (true, Ok(Some(rec))) = (same_scale, cache.db.get_action(&key)) {
            if rec.status == "ok" {
                if let Some(p) = rec.result.get("best").and_then(|b| b.get("params")) {
                    return Some((p.clone(), HandtunedSource::Tuned));
                }
            }
        }
    }
    let space = load_space(&path).ok()?;
    let defaults = space.default_config().params;
    let allowed = |grid: &crate::pipeline::space::ScaleSpace| {
        defaults
            .iter()
            .all(|(k, v)| grid.params.get(k).is_none_or(|vals| vals.contains(v)))
    };
    match space.space.get(scale) {
        Some(grid) if !allowed(grid) => {
            let first = space.configs(scale, &path).ok()?.into_iter().next()?;
            let mut params = defaults;
            params.extend(first.params);
            Some((Value::Object(params), HandtunedSource::Default))
        }
        _ => Some((Value::Object(defaults), HandtunedSource::Default)),
    }
}

/// The generated pipeline `name` evaluating `kernel` on `workload`.
pub fn pipeline_spec(
    name: &str,
    workload: &str,
    kernel: &str,
    s: &EvalSettings,
    handtuned: Option<&Value>,
) -> Value {
    let cand = json!({"kind": "candidate", "path": kernel});
    let wl = format!("workloads/{workload}");
    let mut steps = serde_json::Map::new();
    let common = |kind: &str, needs: Vec<&str>, extra: Value| {
        let mut params = json!({"workload": wl, "impl": cand});
        if let (Value::Object(p), Value::Object(e)) = (&mut params, extra) {
            p.extend(e);
        }
        json!({"kind": kind, "foreach": [{"values": {"workload": [workload]}}], "needs": needs, "params": params, "timeout": s.timeout, "memory_mb": s.memory_mb})
    };
    // A replayed seed is a parameter (and so part of the key); without one the judge draws it.
    let seeded = |mut extra: Value| {
        if let (Some(seed), Value::Object(m)) = (s.seed, &mut extra) {
            m.insert("seed".into(), json!(seed));
        }
        extra
    };
    // The candidate's code runs only in `export` (a fresh sandboxed worker); the steps after it
    // judge the exported program (or, where it cannot be exported, run it in the sandbox).
    steps.insert("export".into(), common("export", vec![], json!({})));
    steps.insert(
        "compile".into(),
        common("compile", vec!["export"], json!({})),
    );
    steps.insert(
        "verify".into(),
        common(
            "verify",
            vec!["export", "compile"],
            seeded(json!({"allow_pure_jax": s.allow_pure_jax})),
        ),
    );
    // The candidate is timed paired with XLA and the hand-tuned kernel: interleaved rounds in
    // one process, so that its speedups hold on a noisy machine (python/jb/ops/profile.py).
    let handtuned_impl = handtuned.map(|cfg| json!({"kind": "baseline", "path": format!("tokamax_baselines/{workload}/baseline.py"), "config": cfg}));
    let mut pair = vec![json!({"kind": "xla"})];
    pair.extend(handtuned_impl.clone());
    let mut measure = json!({"pair": pair});
    if let Some(b) = s.measure_budget {
        measure["budget_s"] = json!(b);
    }
    steps.insert(
        "profile".into(),
        common(
            "profile",
            vec!["export", "verify", "baseline/compile"],
            seeded(measure),
        ),
    );
    if let Some(imp) = handtuned_impl {
        steps.insert("handtuned_compile".into(), json!({"kind": "compile", "foreach": [{"values": {"workload": [workload]}}], "params": {"workload": wl, "impl": imp}, "timeout": 1800}));
        steps.insert("handtuned_verify".into(), json!({"kind": "verify", "foreach": [{"values": {"workload": [workload]}}], "needs": ["handtuned_compile"], "params": {"workload": wl, "impl": imp}, "timeout": 1800}));
        steps.insert(
            "handtuned_profile".into(),
            json!({"kind": "profile", "foreach": [{"values": {"workload": [workload]}}], "needs": ["handtuned_verify", "baseline/compile"], "params": {"workload": wl, "impl": imp}, "timeout": 1800}),
        );
    }
    json!({"name": name, "default": false, "steps": steps})
}

/// The candidate's pipeline, loaded; it may name the candidate file outside the project.
pub fn pipeline(
    name: &str,
    workload: &str,
    kernel: &Path,
    s: &EvalSettings,
    handtuned: Option<&Value>,
) -> Result<LoadedPipeline> {
    let kernel = kernel.to_string_lossy();
    let spec = pipeline_spec(name, workload, &kernel, s, handtuned);
    let text = serde_norway::to_string(&spec).map_err(|e| JbError::Worker(e.to_string()))?;
    let mut loaded = parse_pipeline(Path::new(&format!("<{name}>")), &text)?;
    loaded.file.allow_outside.push(kernel.to_string());
    Ok(loaded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handtuned_defaults_are_replaced_where_the_scale_does_not_allow_them() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let tmp = tempfile::tempdir().unwrap();
        let project = Project::discover(root, Some(root), Some(tmp.path()), None).unwrap();
        let cache = Cache::open(tmp.path()).unwrap();
        let at = |scale: &str| handtuned_config(&project, &cache, "8p_GEMM", scale).unwrap();
        // The published blocks: at paper scale as they are.
        let (paper, source) = at("paper");
        assert_eq!(paper, json!({"bm": 1024, "bn": 2048, "bk": 1024}));
        assert!(matches!(source, HandtunedSource::Default));
        // N = 3584 at cpu scale: 2048 does not divide it; the space's first (largest) blocks.
        assert_eq!(at("cpu").0, json!({"bm": 1024, "bn": 1792, "bk": 1024}));
        assert_eq!(at("tiny").0, json!({"bm": 64, "bn": 448, "bk": 128}));
        assert!(handtuned_config(&project, &cache, "12p_RMSNorm", "cpu").is_none());
    }
}
