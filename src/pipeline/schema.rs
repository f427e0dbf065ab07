//! The YAML schema of a pipeline file, as deserialized (before validation and expansion) or as
//! built by a generator (`jb eval`, `jb agent`) and serialized back to the same YAML. Fields
//! that hold their default are left out when serialized.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// One `pipelines/*.yaml` file.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineFile {
    /// Defaults to the file stem.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether `jb build all` includes this pipeline.
    #[serde(default = "yes")]
    pub default: bool,
    /// Absolute folders outside the project that this pipeline's paths (workloads,
    /// implementations, inputs, outputs) may name; anything else outside is an error.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_outside: Vec<String>,
    pub steps: IndexMap<String, StepDef>,
}

fn yes() -> bool {
    true
}

fn is_null(v: &serde_json::Value) -> bool {
    v.is_null()
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

impl PipelineFile {
    /// A generated pipeline named `name`, left out of `jb build all`, with no steps yet.
    pub fn generated(name: &str) -> Self {
        PipelineFile {
            name: Some(name.to_string()),
            description: None,
            default: false,
            allow_outside: Vec::new(),
            steps: IndexMap::new(),
        }
    }

    /// Add (or replace) the step `name`.
    pub fn step(mut self, name: impl Into<String>, def: StepDef) -> Self {
        self.steps.insert(name.into(), def);
        self
    }
}

/// What a step does; each kind has its own executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// A shell command with declared inputs and outputs.
    Command,
    /// Import and jit-compile an implementation for a workload (Python worker).
    Compile,
    /// Compare an implementation with the reference (Python worker).
    Verify,
    /// Time an implementation under the profiler (Python worker).
    Profile,
    /// Export a candidate's program with `jax.export` (a fresh sandboxed Python worker); the
    /// candidate's downstream steps then judge that program, never importing the candidate.
    Export,
    /// Rank the configurations of a grid search and keep the best.
    Grid,
    /// Combine upstream results into a summary.
    Aggregate,
    /// Ask an agent for a candidate kernel.
    Translate,
}

impl StepKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StepKind::Command => "command",
            StepKind::Compile => "compile",
            StepKind::Verify => "verify",
            StepKind::Profile => "profile",
            StepKind::Export => "export",
            StepKind::Grid => "grid",
            StepKind::Aggregate => "aggregate",
            StepKind::Translate => "translate",
        }
    }

    /// Steps that run in the Python worker (their keys include the environment fingerprint).
    pub fn uses_python(self) -> bool {
        matches!(
            self,
            StepKind::Compile | StepKind::Verify | StepKind::Profile | StepKind::Export
        )
    }

    /// Steps whose results are measurements (re-measured with --remeasure).
    pub fn is_measurement(self) -> bool {
        matches!(self, StepKind::Profile)
    }
}

/// Which results are kept in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CachePolicy {
    /// Successes and the implementation's own failures (compile error, wrong output); not
    /// infrastructure failures (timeout, crash).
    #[default]
    Results,
    /// Everything, infrastructure failures included.
    All,
    /// Nothing: the step runs every time.
    Never,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StepDef {
    pub kind: StepKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Expansion axes, combined in order (later axes may use earlier variables).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub foreach: Vec<AxisDef>,
    /// Parameters handed to the executor; `{var}` placeholders are filled in.
    #[serde(default, skip_serializing_if = "is_null")]
    pub params: serde_json::Value,
    /// Files (globs allowed) whose content is part of the key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<String>,
    /// Files a `command` step produces (kept in the cache and restored).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<String>,
    /// The shell command of a `command` step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// Steps this one depends on: `step` (same pipeline) or `pipeline/step`. Instances are joined
    /// on the variables they share.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<String>,
    /// Named resources this step holds while it runs, e.g. `{device: 1}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, u32>,
    /// Wall-clock limit in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
    /// Memory limit of the worker in MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub cache: CachePolicy,
    /// A salt: change it to force the step (and its dependants) to run again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub salt: Option<String>,
}

impl StepDef {
    /// A step of `kind` with nothing else set (what a file with only `kind:` says).
    pub fn new(kind: StepKind) -> Self {
        StepDef {
            kind,
            description: None,
            foreach: Vec::new(),
            params: serde_json::Value::Null,
            inputs: Vec::new(),
            outputs: Vec::new(),
            run: None,
            needs: Vec::new(),
            resources: BTreeMap::new(),
            timeout: None,
            memory_mb: None,
            cache: CachePolicy::default(),
            salt: None,
        }
    }

    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }

    /// Add an expansion axis.
    pub fn foreach(mut self, axis: AxisDef) -> Self {
        self.foreach.push(axis);
        self
    }

    pub fn params(mut self, params: serde_json::Value) -> Self {
        self.params = params;
        self
    }

    pub fn needs<S: AsRef<str>>(mut self, steps: &[S]) -> Self {
        self.needs
            .extend(steps.iter().map(|s| s.as_ref().to_string()));
        self
    }

    pub fn timeout(mut self, seconds: f64) -> Self {
        self.timeout = Some(seconds);
        self
    }

    pub fn memory_mb(mut self, mb: u64) -> Self {
        self.memory_mb = Some(mb);
        self
    }

    pub fn cache(mut self, policy: CachePolicy) -> Self {
        self.cache = policy;
        self
    }
}

/// One entry of `foreach`, as written: exactly one of `match`, `values` or `grid`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AxisDef {
    /// A path pattern with `{var}` placeholders (each matches one path component; `*` globs).
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// With `match`: an empty match is fine (no instances) instead of an error.
    #[serde(default, skip_serializing_if = "is_default")]
    pub allow_empty: bool,
    /// Explicit values: `{seed: [1, 2, 3]}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub values: Option<IndexMap<String, Vec<serde_json::Value>>>,
    /// A search-space file (`space.yaml`): one instance per configuration at the current scale;
    /// binds `config` (a stable name) and `config_params` (the parameter object).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grid: Option<String>,
}

/// One expansion axis of `foreach`.
#[derive(Debug, Clone)]
pub enum Axis {
    Match { pattern: String, allow_empty: bool },
    Values(IndexMap<String, Vec<serde_json::Value>>),
    Grid(String),
}

impl AxisDef {
    /// `values: {var: [v, ...]}`: one instance per value of the one variable `var`.
    pub fn values(var: &str, values: Vec<serde_json::Value>) -> Self {
        AxisDef {
            pattern: None,
            allow_empty: false,
            values: Some(IndexMap::from([(var.to_string(), values)])),
            grid: None,
        }
    }

    pub fn axis(&self) -> Result<Axis, String> {
        match (&self.pattern, &self.values, &self.grid) {
            (Some(p), None, None) => Ok(Axis::Match {
                pattern: p.clone(),
                allow_empty: self.allow_empty,
            }),
            (None, Some(v), None) if !self.allow_empty => Ok(Axis::Values(v.clone())),
            (None, None, Some(g)) if !self.allow_empty => Ok(Axis::Grid(g.clone())),
            (None, None, None) => {
                Err("a `foreach` entry needs one of `match`, `values` or `grid`".into())
            }
            _ if self.allow_empty && self.pattern.is_none() => {
                Err("`allow_empty` goes with `match`".into())
            }
            _ => Err("a `foreach` entry takes only one of `match`, `values` or `grid`".into()),
        }
    }
}
