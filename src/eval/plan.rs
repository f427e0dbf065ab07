//! The pipeline generated for a candidate: export, compile, verify and a paired profile beside
//! the XLA baseline and, where the workload has one, the hand-tuned kernel.

use std::path::Path;

use serde_json::{json, Value};

use super::result::HandtunedSource;
use super::EvalSettings;
use crate::cache::Cache;
use crate::error::Result;
use crate::pipeline::{
    generated_pipeline, space::load_space, AxisDef, LoadedPipeline, PipelineFile, StepDef, StepKind,
};
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
) -> PipelineFile {
    let cand = json!({"kind": "candidate", "path": kernel});
    let wl = format!("workloads/{workload}");
    let one = || AxisDef::values("workload", vec![json!(workload)]);
    let common = |kind: StepKind, needs: &[&str], extra: Value| {
        let mut params = json!({"workload": wl, "impl": cand});
        if let (Value::Object(p), Value::Object(e)) = (&mut params, extra) {
            p.extend(e);
        }
        StepDef::new(kind)
            .foreach(one())
            .needs(needs)
            .params(params)
            .timeout(s.timeout)
            .memory_mb(s.memory_mb)
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
    let verify = seeded(json!({"allow_pure_jax": s.allow_pure_jax}));
    // The candidate is timed paired with XLA and the hand-tuned kernel: interleaved rounds in
    // one process, so that its speedups hold on a noisy machine (python/jb/ops/profile.py).
    let handtuned_impl = handtuned.map(|cfg| json!({"kind": "baseline", "path": format!("tokamax_baselines/{workload}/baseline.py"), "config": cfg}));
    let mut pair = vec![json!({"kind": "xla"})];
    pair.extend(handtuned_impl.clone());
    let mut measure = json!({"pair": pair});
    if let Some(b) = s.measure_budget {
        // A budget asked for is the budget: the default cost rule (no longer than the separate
        // profile steps) is lifted, so a noisy machine can buy a narrower interval with time.
        measure["budget_s"] = json!(b);
        measure["cost_rule"] = json!(false);
    }
    let mut file = PipelineFile::generated(name)
        .step("export", common(StepKind::Export, &[], json!({})))
        .step("compile", common(StepKind::Compile, &["export"], json!({})))
        .step(
            "verify",
            common(StepKind::Verify, &["export", "compile"], verify),
        )
        .step(
            "profile",
            common(
                StepKind::Profile,
                &["export", "verify", "baseline/compile"],
                seeded(measure),
            ),
        );
    if let Some(imp) = handtuned_impl {
        let params = json!({"workload": wl, "impl": imp});
        let step = |kind: StepKind, needs: &[&str]| {
            StepDef::new(kind)
                .foreach(one())
                .needs(needs)
                .params(params.clone())
                .timeout(crate::settings::DEFAULT_STEP_TIMEOUT_S as f64)
        };
        file = file
            .step("handtuned_compile", step(StepKind::Compile, &[]))
            .step(
                "handtuned_verify",
                step(StepKind::Verify, &["handtuned_compile"]),
            )
            .step(
                "handtuned_profile",
                step(StepKind::Profile, &["handtuned_verify", "baseline/compile"]),
            );
    }
    file
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
    let mut loaded = generated_pipeline("jb eval", spec)?;
    loaded.file.allow_outside.push(kernel.to_string());
    Ok(loaded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::progress;
    use crate::pipeline::parse_pipeline;

    fn settings() -> EvalSettings {
        EvalSettings {
            timeout: 60.0,
            memory_mb: 4096,
            allow_pure_jax: false,
            remeasure: false,
            measure_budget: Some(2.5),
            handtuned: true,
            jobs: 1,
            progress: progress::Mode::Quiet,
            seed: Some(7),
        }
    }

    /// What the generator wrote as YAML before it built typed values (same keys, same order).
    const AS_YAML: &str = r#"
name: e
default: false
steps:
  export:
    kind: export
    foreach: [{values: {workload: [w]}}]
    needs: []
    params: {workload: workloads/w, impl: {kind: candidate, path: /k.py}}
    timeout: 60.0
    memory_mb: 4096
  compile:
    kind: compile
    foreach: [{values: {workload: [w]}}]
    needs: [export]
    params: {workload: workloads/w, impl: {kind: candidate, path: /k.py}}
    timeout: 60.0
    memory_mb: 4096
  verify:
    kind: verify
    foreach: [{values: {workload: [w]}}]
    needs: [export, compile]
    params: {workload: workloads/w, impl: {kind: candidate, path: /k.py}, allow_pure_jax: false, seed: 7}
    timeout: 60.0
    memory_mb: 4096
  profile:
    kind: profile
    foreach: [{values: {workload: [w]}}]
    needs: [export, verify, baseline/compile]
    params:
      workload: workloads/w
      impl: {kind: candidate, path: /k.py}
      pair: [{kind: xla}, {kind: baseline, path: tokamax_baselines/w/baseline.py, config: {block: 128, fused: true}}]
      budget_s: 2.5
      cost_rule: false
      seed: 7
    timeout: 60.0
    memory_mb: 4096
  handtuned_compile:
    kind: compile
    foreach: [{values: {workload: [w]}}]
    params: {workload: workloads/w, impl: {kind: baseline, path: tokamax_baselines/w/baseline.py, config: {block: 128, fused: true}}}
    timeout: 1800
  handtuned_verify:
    kind: verify
    foreach: [{values: {workload: [w]}}]
    needs: [handtuned_compile]
    params: {workload: workloads/w, impl: {kind: baseline, path: tokamax_baselines/w/baseline.py, config: {block: 128, fused: true}}}
    timeout: 1800
  handtuned_profile:
    kind: profile
    foreach: [{values: {workload: [w]}}]
    needs: [handtuned_verify, baseline/compile]
    params: {workload: workloads/w, impl: {kind: baseline, path: tokamax_baselines/w/baseline.py, config: {block: 128, fused: true}}}
    timeout: 1800
"#;

    #[test]
    fn typed_pipeline_is_what_the_yaml_said() {
        let cfg = json!({"block": 128, "fused": true});
        let typed = pipeline_spec("e", "w", "/k.py", &settings(), Some(&cfg));
        let parsed = parse_pipeline(Path::new("<e>"), AS_YAML).unwrap().file;
        assert_eq!(typed, parsed);
        // Key order too (parameters are hashed as written).
        assert_eq!(
            serde_json::to_string(&typed).unwrap(),
            serde_json::to_string(&parsed).unwrap()
        );
        // And the typed value serializes to YAML that reads back as itself.
        let text = serde_norway::to_string(&typed).unwrap();
        assert_eq!(parse_pipeline(Path::new("<e>"), &text).unwrap().file, typed);
    }

    /// `pipelines/eval.yaml` (every file under candidates/) and `jb eval`'s generated plan are
    /// one pipeline: the same steps in the same order, of the same kinds, with the same needs,
    /// the same implementation kinds and the same pairing with XLA (the plan adds the hand-tuned
    /// steps and pairing, and takes its limits from the command line).
    #[test]
    fn the_candidates_pipeline_file_and_the_generated_plan_agree() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines/eval.yaml");
        let file = parse_pipeline(&path, &std::fs::read_to_string(&path).unwrap())
            .unwrap()
            .file;
        let plan = pipeline_spec("e", "w", "/k.py", &settings(), None);
        let names = |f: &PipelineFile| f.steps.keys().cloned().collect::<Vec<_>>();
        assert_eq!(names(&file), names(&plan));
        for (name, ours) in &plan.steps {
            let theirs = &file.steps[name];
            assert_eq!(theirs.kind, ours.kind, "{name}");
            assert_eq!(theirs.needs, ours.needs, "{name}");
            assert_eq!(
                theirs.params["impl"]["kind"], ours.params["impl"]["kind"],
                "{name}"
            );
            assert_eq!(
                theirs.params.get("pair"),
                ours.params.get("pair"),
                "{name}: the same pairing"
            );
        }
    }

    #[test]
    fn without_handtuned_or_seed() {
        let s = EvalSettings {
            seed: None,
            measure_budget: None,
            ..settings()
        };
        let typed = pipeline_spec("e", "w", "/k.py", &s, None);
        let names: Vec<&str> = typed.steps.keys().map(String::as_str).collect();
        assert_eq!(names, ["export", "compile", "verify", "profile"]);
        assert_eq!(
            typed.steps["profile"].params["pair"],
            json!([{"kind": "xla"}])
        );
        assert!(typed.steps["verify"].params.get("seed").is_none());
    }

    #[test]
    fn generated_errors_name_the_generator_without_a_position() {
        let bad = pipeline_spec("bad name", "w", "/k.py", &settings(), None);
        let e = generated_pipeline("jb eval", bad).unwrap_err();
        assert_eq!(
            e.to_string(),
            "<jb eval>: invalid pipeline name `bad name`: use letters, digits, `-` and `_`"
        );
    }

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
