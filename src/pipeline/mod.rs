//! Pipelines: YAML files under `pipelines/`, validated and expanded into concrete step instances.

pub mod depth;
pub mod locate;
pub mod paths;
pub mod schema;
pub mod space;
pub mod template;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::error::{JbError, Location, Result};
use crate::project::Project;
pub use schema::{Axis, AxisDef, CachePolicy, PipelineFile, StepDef, StepKind};
use template::{fill, fill_value, Vars};

/// A parsed pipeline file with its text (kept for locating errors).
#[derive(Debug, Clone)]
pub struct LoadedPipeline {
    pub name: String,
    pub path: PathBuf,
    pub text: String,
    pub file: PipelineFile,
}

impl LoadedPipeline {
    pub fn error_at(&self, key_path: &[&str], message: impl Into<String>) -> JbError {
        let (line, column) = locate::locate_key(&self.text, key_path);
        JbError::pipeline(&self.path, line, column, message)
    }

    pub fn location(&self, key_path: &[&str]) -> Location {
        let (line, column) = locate::locate_key(&self.text, key_path);
        Location {
            file: self.path.clone(),
            line,
            column,
        }
    }
}

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

pub fn parse_pipeline(path: &Path, text: &str) -> Result<LoadedPipeline> {
    depth::check(path, text)?;
    let file: PipelineFile = serde_norway::from_str(text).map_err(|e| {
        let (line, column) = e
            .location()
            .map(|l| (l.line(), l.column()))
            .unwrap_or((1, 1));
        let msg = e.to_string();
        // serde_norway appends " at line L column C"; the location is already in front.
        let msg = match msg.find(" at line ") {
            Some(i) => msg[..i].to_string(),
            None => msg,
        };
        JbError::pipeline(path, line, column, msg)
    })?;
    let name = file.name.clone().unwrap_or_else(|| {
        path.file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string()
    });
    let loaded = LoadedPipeline {
        name,
        path: path.to_path_buf(),
        text: text.to_string(),
        file,
    };
    if !valid_name(&loaded.name) {
        return Err(loaded.error_at(
            &["name"],
            format!(
                "invalid pipeline name `{}`: use letters, digits, `-` and `_`",
                loaded.name
            ),
        ));
    }
    if loaded.file.steps.is_empty() {
        return Err(loaded.error_at(&["steps"], "a pipeline needs at least one step"));
    }
    if let Some(bad) = loaded
        .file
        .allow_outside
        .iter()
        .find(|r| !Path::new(r).is_absolute() || r.split('/').any(|c| c == ".."))
    {
        return Err(loaded.error_at(
            &["allow_outside"],
            format!("allow_outside: `{bad}` is not an absolute path without `..`"),
        ));
    }
    for (name, def) in &loaded.file.steps {
        if !valid_name(name) {
            return Err(loaded.error_at(
                &["steps", name],
                format!("invalid step name `{name}`: use letters, digits, `-` and `_`"),
            ));
        }
        if def.kind == StepKind::Command && def.run.is_none() {
            return Err(loaded.error_at(
                &["steps", name],
                format!("step `{name}`: a `command` step needs `run`"),
            ));
        }
        if def.kind != StepKind::Command && def.run.is_some() {
            return Err(loaded.error_at(
                &["steps", name, "run"],
                format!("step `{name}`: `run` is only for `command` steps"),
            ));
        }
        for axis in &def.foreach {
            axis.axis().map_err(|m| {
                loaded.error_at(&["steps", name, "foreach"], format!("step `{name}`: {m}"))
            })?;
        }
        if let Some(t) = def.timeout {
            if t <= 0.0 || !t.is_finite() {
                return Err(loaded.error_at(
                    &["steps", name, "timeout"],
                    format!("step `{name}`: timeout must be a positive number of seconds"),
                ));
            }
        }
    }
    Ok(loaded)
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Read and parse every `*.yaml`/`*.yml` file in the project's `pipelines/` folder.
pub fn load_pipelines(project: &Project) -> Result<Vec<LoadedPipeline>> {
    let dir = project.pipelines_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| JbError::io(&dir, e))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
        .collect();
    files.sort();
    let mut out: Vec<LoadedPipeline> = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).map_err(|e| JbError::io(&path, e))?;
        let rel = PathBuf::from(project.rel(&path));
        let p = parse_pipeline(&rel, &text)?;
        if let Some(other) = out.iter().find(|o| o.name == p.name) {
            return Err(p.error_at(
                &["name"],
                format!(
                    "pipeline name `{}` is also used by {}",
                    p.name,
                    other.path.display()
                ),
            ));
        }
        out.push(p);
    }
    Ok(out)
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
            for (pp, s) in &needs {
                let exists = pipelines
                    .iter()
                    .any(|q| q.name == *pp && q.file.steps.contains_key(s));
                if !exists {
                    return Err(p.error_at(
                        &["steps", name, "needs"],
                        format!("step `{name}` needs `{pp}/{s}`, which does not exist"),
                    ));
                }
            }
            for inst in instances {
                by_def
                    .entry((p.name.clone(), name.clone()))
                    .or_default()
                    .push(steps.len());
                needs_of.push(needs.clone());
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
    for s in steps.iter_mut() {
        if let Some(missing) = s
            .inputs
            .iter()
            .find(|i| !produced.contains(*i) && !project.root.join(i).exists())
        {
            let p = pipelines
                .iter()
                .find(|p| p.name == s.pipeline)
                .expect("pipeline of step");
            return Err(p.error_at(
                &["steps", &s.name, "inputs"],
                format!(
                    "step `{}`: input `{missing}` matches no file and no step produces it",
                    s.name
                ),
            ));
        }
        s.inputs.retain(|i| !produced.contains(i));
    }
    let mut seen_ids: HashMap<String, usize> = HashMap::new();
    for (i, s) in steps.iter().enumerate() {
        if let Some(j) = seen_ids.insert(s.id.clone(), i) {
            let _ = j;
            return Err(JbError::Pipeline {
                at: s.at.clone(),
                message: format!("two instances of step `{}` have the same id `{}`: give `foreach` a variable that tells them apart", s.name, s.id),
            });
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
    check_cycles(&pipelines, &steps)?;
    Ok(PipelineSet { pipelines, steps })
}

/// Instances join when they agree on every variable they share.
fn joins(a: &Vars, b: &Vars) -> bool {
    a.iter()
        .filter(|(k, _)| k.as_str() != "config_params")
        .all(|(k, v)| b.get(k).is_none_or(|w| w == v))
}

fn check_cycles(pipelines: &[LoadedPipeline], steps: &[Step]) -> Result<()> {
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
            let first = &steps[g[scc[0]]];
            let p = pipelines
                .iter()
                .find(|p| p.name == first.pipeline)
                .expect("pipeline of step");
            return Err(p.error_at(
                &["steps", &first.name, "needs"],
                format!("dependency cycle: {}", names.join(" -> ")),
            ));
        }
    }
    Ok(())
}

fn expand_step(
    project: &Project,
    p: &LoadedPipeline,
    name: &str,
    def: &StepDef,
    ctx: &ExpandContext,
) -> Result<Vec<Step>> {
    let err =
        |key: &str, msg: String| p.error_at(&["steps", name, key], format!("step `{name}`: {msg}"));
    let allowed: Vec<PathBuf> = p.file.allow_outside.iter().map(PathBuf::from).collect();
    let roots = paths::Roots::new(&project.root, &allowed);
    let inside = |key: &str, path: &str| roots.check(&project.root, path).map_err(|m| err(key, m));
    let mut base = Vars::new();
    base.insert("scale".into(), json!(ctx.scale));
    base.insert("backend".into(), json!(ctx.backend));
    base.insert("pipeline".into(), json!(p.name));
    base.insert("step".into(), json!(name));
    let builtin: Vec<String> = base.keys().cloned().collect();
    let mut bindings: Vec<Vars> = vec![base];
    for axis_def in &def.foreach {
        let axis = axis_def.axis().map_err(|m| err("foreach", m))?;
        let mut next = Vec::new();
        for b in &bindings {
            match &axis {
                Axis::Match {
                    pattern,
                    allow_empty,
                } => {
                    let pattern = fill(pattern, &without_placeholders(b, pattern))
                        .map_err(|m| err("foreach", m))?;
                    inside("foreach", &pattern)?;
                    let matches = paths::try_match_pattern(&project.root, &pattern)
                        .map_err(|m| err("foreach", m))?;
                    if matches.is_empty() && !allow_empty {
                        return Err(err("foreach", format!("pattern `{pattern}` matches nothing (add `allow_empty: true` if that is expected)")));
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
                            return Err(err("foreach", format!("`{k}` has no values")));
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
                    let rel = fill(path, b).map_err(|m| err("foreach", m))?;
                    inside("foreach", &rel)?;
                    let full = project.root.join(&rel);
                    if !full.is_file() {
                        return Err(err(
                            "foreach",
                            format!("search space `{rel}` does not exist"),
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
    let at = p.location(&["steps", name]);
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
        let params = fill_value(&def.params, &vars).map_err(|m| err("params", m))?;
        let run = def
            .run
            .as_ref()
            .map(|r| template::fill_shell(r, &vars))
            .transpose()
            .map_err(|m| err("run", m))?;
        let outputs = def
            .outputs
            .iter()
            .map(|o| fill(o, &vars))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|m| err("outputs", m))?;
        for o in &outputs {
            inside("outputs", o)?;
        }
        for (key, path) in param_paths(&params) {
            inside("params", path).map_err(|e| match e {
                JbError::Pipeline { at, message } => JbError::Pipeline {
                    at,
                    message: format!("{message} (params.{key})"),
                },
                other => other,
            })?;
        }
        let mut inputs = Vec::new();
        for pattern in &def.inputs {
            let pat = fill(pattern, &vars).map_err(|m| err("inputs", m))?;
            inside("inputs", &pat)?;
            let files =
                paths::try_expand_files(&project.root, &pat).map_err(|m| err("inputs", m))?;
            for f in &files {
                inside("inputs", f)?;
            }
            if files.is_empty() {
                if pat.contains(['*', '?', '[']) {
                    return Err(err("inputs", format!("input `{pat}` matches no file")));
                }
                // Perhaps produced by another step: checked once every step is expanded.
                inputs.push(pat);
                continue;
            }
            inputs.extend(files);
        }
        for implied in implied_inputs(def.kind, &params) {
            let files =
                paths::try_expand_files(&project.root, &implied).map_err(|m| err("params", m))?;
            for f in &files {
                inside("params", f)?;
            }
            inputs.extend(files);
        }
        inputs.sort();
        inputs.dedup();
        let mut vars = vars;
        vars.retain(|k, _| !builtin.contains(k));
        out.push(Step {
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
            at: at.clone(),
        });
    }
    Ok(out)
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
        JbError::Pipeline { mut at, message } => {
            at.file = PathBuf::from(rel);
            JbError::Pipeline { at, message }
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
