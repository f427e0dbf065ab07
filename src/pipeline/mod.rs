//! Pipelines: YAML files under `pipelines/`, validated and expanded into concrete step instances.

pub mod depth;
pub mod diagnostic;
pub mod error;
pub mod listing;
pub mod loaded;
pub mod paths;
pub mod schema;
pub mod space;
pub mod span;
pub mod template;
pub mod tree;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::error::{JbError, Location, Result};
use crate::project::Project;
use crate::yaml_path;
use error::{utf8_text, PipelineErrorKind as Kind};
pub use loaded::{generated_pipeline, parse_pipeline, LoadedPipeline, Origin};
pub use schema::{Axis, AxisDef, CachePolicy, PipelineFile, StepDef, StepKind};
use template::{fill, fill_value, Vars};
use tree::Seg;

/// One concrete step: a step definition with its variables bound.
#[derive(Debug, Clone)]
pub struct Step {
    /// `pipeline/step` or `pipeline/step[var=value,...]`.
    pub id: String,
    pub pipeline: String,
    pub name: String,
    pub kind: StepKind,
    pub vars: Vars,
    pub params: Value,
    /// Input files relative to the project root, sorted.
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub run: Option<String>,
    /// Indices into the step list.
    pub deps: Vec<usize>,
    pub resources: BTreeMap<String, u32>,
    pub timeout: Option<f64>,
    pub memory_mb: Option<u64>,
    pub cache: CachePolicy,
    pub salt: Option<String>,
    pub default: bool,
    pub at: Location,
}

impl Step {
    /// The workload this step is about, if it has one.
    pub fn workload(&self) -> Option<&str> {
        self.vars.get("workload").and_then(Value::as_str)
    }

    /// Whether this step runs untrusted code (a candidate kernel): it then gets a fresh worker.
    pub fn untrusted(&self) -> bool {
        self.params
            .get("impl")
            .and_then(|i| i.get("kind"))
            .and_then(Value::as_str)
            == Some("candidate")
    }
}

/// All pipelines of a project, expanded.
#[derive(Debug, Clone)]
pub struct PipelineSet {
    pub pipelines: Vec<LoadedPipeline>,
    pub steps: Vec<Step>,
}

/// Settings that expansion depends on.
#[derive(Debug, Clone)]
pub struct ExpandContext {
    pub scale: String,
    pub backend: String,
}

/// Read and parse every `*.yaml`/`*.yml` file in the project's `pipelines/` folder.
/// The scale a build uses when none is asked for: `cpu` (small enough for the interpreter) on the
/// CPU backend, `paper` (the published sizes) on an accelerator. The one place of this rule: the
/// worker is always told the scale.
pub fn default_scale(backend: &str) -> &'static str {
    if backend == "cpu" {
        "cpu"
    } else {
        "paper"
    }
}

/// The project's pipelines, and the files among them that do not parse (or repeat an earlier
/// pipeline's name), each with its error, in file order (for commands that run generated
/// pipelines and need none of a broken file's steps).
pub fn load_pipelines_skipping_broken(
    project: &Project,
) -> Result<(Vec<LoadedPipeline>, Vec<JbError>)> {
    let dir = project.pipelines_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| JbError::io(&dir, e))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
        .collect();
    files.sort();
    let (mut out, mut broken): (Vec<LoadedPipeline>, Vec<JbError>) = (Vec::new(), Vec::new());
    for path in files {
        let rel = PathBuf::from(project.rel(&path));
        let parsed = std::fs::read(&path)
            .map_err(|e| JbError::io(&path, e))
            .and_then(|bytes| utf8_text(&rel, bytes))
            .and_then(|text| parse_pipeline(&rel, &text));
        match parsed {
            Ok(p) => match out.iter().find(|o| o.name == p.name) {
                Some(other) => broken.push(p.value_error(
                    &yaml_path!["name"],
                    Kind::DuplicatePipelineName {
                        name: p.name.clone(),
                        other: other.path.clone(),
                    },
                )),
                None => out.push(p),
            },
            Err(e) => broken.push(e),
        }
    }
    Ok((out, broken))
}

/// The project's pipelines; the first file that does not parse (or repeats a name) is the error.
pub fn load_pipelines(project: &Project) -> Result<Vec<LoadedPipeline>> {
    let (out, broken) = load_pipelines_skipping_broken(project)?;
    match broken.into_iter().next() {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// Expand every pipeline into step instances and resolve dependencies; validates references,
/// patterns, placeholders and cycles.
pub fn expand(
    project: &Project,
    pipelines: Vec<LoadedPipeline>,
    ctx: &ExpandContext,
) -> Result<PipelineSet> {
    let mut steps: Vec<Step> = Vec::new();
    // (pipeline, step) -> instance indices
    let mut by_def: HashMap<(String, String), Vec<usize>> = HashMap::new();
    let mut needs_of: Vec<Vec<(String, String)>> = Vec::new();
    let mut pending_of: Vec<Pending> = Vec::new();
    for p in &pipelines {
        for (name, def) in &p.file.steps {
            let instances = expand_step(project, p, name, def, ctx)?;
            let needs: Vec<(String, String)> = def
                .needs
                .iter()
                .map(|n| match n.split_once('/') {
                    Some((pp, s)) => (pp.to_string(), s.to_string()),
                    None => (p.name.clone(), n.clone()),
                })
                .collect();
            for (j, (pp, s)) in needs.iter().enumerate() {
                let exists = pipelines
                    .iter()
                    .any(|q| q.name == *pp && q.file.steps.contains_key(s));
                if !exists {
                    return Err(p.step_error(
                        name,
                        &yaml_path!["needs", j],
                        Kind::UnknownStep {
                            step: name.clone(),
                            target: format!("{pp}/{s}"),
                        },
                    ));
                }
            }
            for (inst, pending) in instances {
                by_def
                    .entry((p.name.clone(), name.clone()))
                    .or_default()
                    .push(steps.len());
                needs_of.push(needs.clone());
                pending_of.push(pending);
                steps.push(inst);
            }
        }
    }
    // Inputs that other steps produce are covered by those steps' output digests; an input that
    // neither exists nor is produced is an error.
    let produced: std::collections::HashSet<String> = steps
        .iter()
        .flat_map(|s| s.outputs.iter().cloned())
        .collect();
    for (s, pending) in steps.iter_mut().zip(&pending_of) {
        if let Some((missing, j)) = pending
            .iter()
            .find(|(i, _)| !produced.contains(i) && !project.root.join(i).exists())
        {
            return Err(pipeline_of(&pipelines, s).step_error(
                &s.name,
                &yaml_path!["inputs", *j],
                Kind::InputNotProduced {
                    step: s.name.clone(),
                    input: missing.clone(),
                },
            ));
        }
        s.inputs.retain(|i| !produced.contains(i));
    }
    let mut seen_ids: HashMap<&str, usize> = HashMap::new();
    for (i, s) in steps.iter().enumerate() {
        if seen_ids.insert(&s.id, i).is_some() {
            return Err(pipeline_of(&pipelines, s).key_error(
                &yaml_path!["steps", &s.name],
                Kind::DuplicateId {
                    step: s.name.clone(),
                    id: s.id.clone(),
                },
            ));
        }
    }
    for i in 0..steps.len() {
        let mut deps = Vec::new();
        for (pp, s) in &needs_of[i] {
            for &j in by_def
                .get(&(pp.clone(), s.clone()))
                .map(Vec::as_slice)
                .unwrap_or(&[])
            {
                if joins(&steps[i].vars, &steps[j].vars) {
                    deps.push(j);
                }
            }
        }
        deps.sort_unstable();
        deps.dedup();
        steps[i].deps = deps;
    }
    check_cycles(&pipelines, &steps, &needs_of)?;
    Ok(PipelineSet { pipelines, steps })
}

/// The pipeline a step instance comes from.
fn pipeline_of<'a>(pipelines: &'a [LoadedPipeline], s: &Step) -> &'a LoadedPipeline {
    pipelines
        .iter()
        .find(|p| p.name == s.pipeline)
        .expect("pipeline of step")
}

/// Instances join when they agree on every variable they share.
fn joins(a: &Vars, b: &Vars) -> bool {
    a.iter()
        .filter(|(k, _)| k.as_str() != "config_params")
        .all(|(k, v)| b.get(k).is_none_or(|w| w == v))
}

/// A cycle is an error at the first of its steps' `needs` entries that names another step of
/// the cycle.
fn check_cycles(
    pipelines: &[LoadedPipeline],
    steps: &[Step],
    needs_of: &[Vec<(String, String)>],
) -> Result<()> {
    let mut g = petgraph::graph::DiGraph::<usize, ()>::new();
    let nodes: Vec<_> = (0..steps.len()).map(|i| g.add_node(i)).collect();
    for (i, s) in steps.iter().enumerate() {
        for &d in &s.deps {
            g.add_edge(nodes[d], nodes[i], ());
        }
    }
    for scc in petgraph::algo::tarjan_scc(&g) {
        let cyclic = scc.len() > 1 || scc.iter().any(|n| g.contains_edge(*n, *n));
        if cyclic {
            let mut names: Vec<String> = scc
                .iter()
                .map(|n| format!("{}/{}", steps[g[*n]].pipeline, steps[g[*n]].name))
                .collect();
            names.sort();
            names.dedup();
            let first = g[scc[0]];
            let in_cycle = |(pp, s): &(String, String)| names.contains(&format!("{pp}/{s}"));
            let j = needs_of[first].iter().position(in_cycle).unwrap_or(0);
            let first = &steps[first];
            return Err(pipeline_of(pipelines, first).step_error(
                &first.name,
                &yaml_path!["needs", j],
                Kind::Cycle(names),
            ));
        }
    }
    Ok(())
}

/// Inputs of an instance that name no file yet, with their place in the step's `inputs`.
type Pending = Vec<(String, usize)>;

fn expand_step(
    project: &Project,
    p: &LoadedPipeline,
    name: &str,
    def: &StepDef,
    ctx: &ExpandContext,
) -> Result<Vec<(Step, Pending)>> {
    let step = || name.to_string();
    let at = |rest: &[Seg], kind: Kind| p.step_error(name, rest, kind);
    let foreach = |i: usize, message: String| {
        at(
            &yaml_path!["foreach", i],
            Kind::Foreach {
                step: step(),
                message,
            },
        )
    };
    // At the placeholder itself (`{name}` in backquotes in the message), within the value.
    let template = |rest: &[Seg], message: String| {
        let mut span = p.step_span(name, rest);
        if let Some(placeholder) = message.split('`').find(|w| w.starts_with('{')) {
            span = span.narrow(p.text(), placeholder);
        }
        p.error(
            span,
            Kind::Template {
                step: step(),
                message,
            },
        )
    };
    let escape = |rest: &[Seg], message: String| {
        at(
            rest,
            Kind::PathEscape {
                step: step(),
                message,
            },
        )
    };
    let allowed: Vec<PathBuf> = p.file.allow_outside.iter().map(PathBuf::from).collect();
    let roots = paths::Roots::new(&project.root, &allowed);
    let inside = |rest: &[Seg], path: &str| {
        roots
            .check(&project.root, path)
            .map_err(|m| escape(rest, m))
    };
    let mut base = Vars::new();
    base.insert("scale".into(), json!(ctx.scale));
    base.insert("backend".into(), json!(ctx.backend));
    base.insert("pipeline".into(), json!(p.name));
    base.insert("step".into(), json!(name));
    let builtin: Vec<String> = base.keys().cloned().collect();
    let mut bindings: Vec<Vars> = vec![base];
    for (i, axis_def) in def.foreach.iter().enumerate() {
        let axis = axis_def.axis().map_err(|m| foreach(i, m))?;
        let mut next = Vec::new();
        for b in &bindings {
            match &axis {
                Axis::Match {
                    pattern,
                    allow_empty,
                } => {
                    let here = yaml_path!["foreach", i, "match"];
                    let pattern = fill(pattern, &without_placeholders(b, pattern))
                        .map_err(|m| template(&here, m))?;
                    inside(&here, &pattern)?;
                    let matches = paths::try_match_pattern(&project.root, &pattern)
                        .map_err(|m| escape(&here, m))?;
                    if matches.is_empty() && !allow_empty {
                        return Err(at(
                            &here,
                            Kind::GlobMatchesNothing {
                                step: step(),
                                pattern,
                            },
                        ));
                    }
                    for (_, vars) in matches {
                        let mut v = b.clone();
                        for (k, val) in vars {
                            v.insert(k, json!(val));
                        }
                        next.push(v);
                    }
                }
                Axis::Values(values) => {
                    let mut combos = vec![b.clone()];
                    for (k, vals) in values {
                        if vals.is_empty() {
                            return Err(at(
                                &yaml_path!["foreach", i, "values", k],
                                Kind::Foreach {
                                    step: step(),
                                    message: format!("`{k}` has no values"),
                                },
                            ));
                        }
                        combos = combos
                            .into_iter()
                            .flat_map(|c| {
                                vals.iter().map(move |v| {
                                    let mut c = c.clone();
                                    c.insert(k.clone(), v.clone());
                                    c
                                })
                            })
                            .collect();
                    }
                    next.extend(combos);
                }
                Axis::Grid(path) => {
                    let here = yaml_path!["foreach", i, "grid"];
                    let rel = fill(path, b).map_err(|m| template(&here, m))?;
                    inside(&here, &rel)?;
                    let full = project.root.join(&rel);
                    if !full.is_file() {
                        return Err(at(
                            &here,
                            Kind::Foreach {
                                step: step(),
                                message: format!("search space `{rel}` does not exist"),
                            },
                        ));
                    }
                    let space = space::load_space(&full).map_err(|e| relabel(e, &rel))?;
                    for cfg in space.configs(&ctx.scale, Path::new(&rel))? {
                        let mut v = b.clone();
                        v.insert("config".into(), json!(cfg.name));
                        v.insert("config_params".into(), Value::Object(cfg.params));
                        next.push(v);
                    }
                }
            }
        }
        bindings = next;
    }
    let mut out = Vec::new();
    let step_at = p.location(&yaml_path!["steps", name]);
    for vars in bindings {
        let shown: Vec<String> = vars
            .iter()
            .filter(|(k, _)| !builtin.contains(k) && k.as_str() != "config_params")
            .map(|(k, v)| format!("{k}={}", template::var_string(v)))
            .collect();
        let id = if shown.is_empty() {
            format!("{}/{}", p.name, name)
        } else {
            format!("{}/{}[{}]", p.name, name, shown.join(","))
        };
        let params = fill_value(&def.params, &vars).map_err(|m| {
            let mut here = yaml_path!["params"].to_vec();
            unfillable(&def.params, &vars, &mut here);
            template(&here, m)
        })?;
        let run = def
            .run
            .as_ref()
            .map(|r| template::fill_shell(r, &vars))
            .transpose()
            .map_err(|m| template(&yaml_path!["run"], m))?;
        let mut outputs = Vec::new();
        for (j, o) in def.outputs.iter().enumerate() {
            let here = yaml_path!["outputs", j];
            let o = fill(o, &vars).map_err(|m| template(&here, m))?;
            inside(&here, &o)?;
            outputs.push(o);
        }
        for (key, path) in param_paths(&params) {
            let here: Vec<Seg> = std::iter::once("params")
                .chain(key.split('.'))
                .map(Seg::Key)
                .collect();
            roots
                .check(&project.root, path)
                .map_err(|m| escape(&here, format!("{m} (params.{key})")))?;
        }
        let mut inputs = Vec::new();
        let mut pending = Vec::new();
        for (j, pattern) in def.inputs.iter().enumerate() {
            let here = yaml_path!["inputs", j];
            let pat = fill(pattern, &vars).map_err(|m| template(&here, m))?;
            inside(&here, &pat)?;
            let files =
                paths::try_expand_files(&project.root, &pat).map_err(|m| escape(&here, m))?;
            for f in &files {
                inside(&here, f)?;
            }
            if files.is_empty() {
                if pat.contains(['*', '?', '[']) {
                    return Err(at(
                        &here,
                        Kind::InputMatchesNothing {
                            step: step(),
                            input: pat,
                        },
                    ));
                }
                // Perhaps produced by another step: checked once every step is expanded.
                inputs.push(pat.clone());
                pending.push((pat, j));
                continue;
            }
            inputs.extend(files);
        }
        for implied in implied_inputs(def.kind, &params) {
            let here = yaml_path!["params"];
            let files =
                paths::try_expand_files(&project.root, &implied).map_err(|m| escape(&here, m))?;
            for f in &files {
                inside(&here, f)?;
            }
            inputs.extend(files);
        }
        inputs.sort();
        inputs.dedup();
        let mut vars = vars;
        vars.retain(|k, _| !builtin.contains(k));
        out.push((
            Step {
                id,
                pipeline: p.name.clone(),
                name: name.to_string(),
                kind: def.kind,
                vars,
                params,
                inputs,
                outputs,
                run,
                deps: Vec::new(),
                resources: def.resources.clone(),
                timeout: def.timeout,
                memory_mb: def.memory_mb,
                cache: def.cache,
                salt: def.salt.clone(),
                default: p.file.default,
                at: step_at.clone(),
            },
            pending,
        ));
    }
    Ok(out)
}

/// Extend `path` down to the first string of `v` whose placeholders cannot be filled.
fn unfillable<'v>(v: &'v Value, vars: &Vars, path: &mut Vec<Seg<'v>>) -> bool {
    match v {
        Value::String(_) => fill_value(v, vars).is_err(),
        Value::Array(a) => a.iter().enumerate().any(|(i, x)| {
            path.push(Seg::Item(i));
            unfillable(x, vars, path) || path.pop().is_none()
        }),
        Value::Object(o) => o.iter().any(|(k, x)| {
            path.push(Seg::Key(k));
            unfillable(x, vars, path) || path.pop().is_none()
        }),
        _ => false,
    }
}

/// Bindings minus the names a pattern binds itself (so `{workload}` in a later pattern matches
/// instead of failing as unknown, when no earlier axis bound it).
fn without_placeholders(vars: &Vars, pattern: &str) -> Vars {
    let mut v = vars.clone();
    let mut rest = pattern;
    while let Some(start) = rest.find('{') {
        let Some(end) = rest[start..].find('}') else {
            break;
        };
        let name = &rest[start + 1..start + end];
        if !v.contains_key(name) {
            v.insert(name.to_string(), json!(format!("{{{name}}}")));
        }
        rest = &rest[start + end + 1..];
    }
    v
}

fn relabel(e: JbError, rel: &str) -> JbError {
    match e {
        JbError::Pipeline(mut p) => {
            p.file = PathBuf::from(rel);
            JbError::Pipeline(p)
        }
        other => other,
    }
}

/// The paths a step's parameters name: `workload` and `impl.path`.
fn param_paths(params: &Value) -> Vec<(&'static str, &str)> {
    let mut out = Vec::new();
    if let Some(w) = params.get("workload").and_then(Value::as_str) {
        out.push(("workload", w));
    }
    if let Some(p) = params
        .get("impl")
        .and_then(|i| i.get("path"))
        .and_then(Value::as_str)
    {
        out.push(("impl.path", p));
    }
    out
}

/// Files a Python step reads whether or not the pipeline lists them: the workload folder, the
/// candidate file, the baseline folder.
fn implied_inputs(kind: StepKind, params: &Value) -> Vec<String> {
    if !kind.uses_python() {
        return Vec::new();
    }
    let mut out = Vec::new();
    if let Some(w) = params.get("workload").and_then(Value::as_str) {
        out.push(w.to_string());
    }
    if let Some(imp) = params.get("impl") {
        if let Some(path) = imp.get("path").and_then(Value::as_str) {
            match imp.get("kind").and_then(Value::as_str) {
                Some("baseline") => {
                    let folder = Path::new(path)
                        .parent()
                        .map(|p| p.to_string_lossy().to_string());
                    out.extend(folder);
                }
                _ => out.push(path.to_string()),
            }
        }
    }
    out
}
