//! The YAML schema of a pipeline file, as deserialized (before validation and expansion).

use std::collections::BTreeMap;

use indexmap::IndexMap;
use serde::Deserialize;

/// One `pipelines/*.yaml` file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineFile {
    /// Defaults to the file stem.
    pub name: Option<String>,
    pub description: Option<String>,
    /// Whether `jb build all` includes this pipeline.
    #[serde(default = "yes")]
    pub default: bool,
    /// Absolute folders outside the project that this pipeline's paths (workloads,
    /// implementations, inputs, outputs) may name; anything else outside is an error.
    #[serde(default)]
    pub allow_outside: Vec<String>,
    pub steps: IndexMap<String, StepDef>,
}

fn yes() -> bool {
    true
}

/// What a step does; each kind has its own executor.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, serde::Serialize,
)]
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
            StepKind::Grid => "grid",
            StepKind::Aggregate => "aggregate",
            StepKind::Translate => "translate",
        }
    }

    /// Steps that run in the Python worker (their keys include the environment fingerprint).
    pub fn uses_python(self) -> bool {
        matches!(
            self,
            StepKind::Compile | StepKind::Verify | StepKind::Profile
        )
    }

    /// Steps whose results are measurements (re-measured with --remeasure).
    pub fn is_measurement(self) -> bool {
        matches!(self, StepKind::Profile)
    }
}

/// Which results are kept in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepDef {
    pub kind: StepKind,
    pub description: Option<String>,
    /// Expansion axes, combined in order (later axes may use earlier variables).
    #[serde(default)]
    pub foreach: Vec<AxisDef>,
    /// Parameters handed to the executor; `{var}` placeholders are filled in.
    #[serde(default)]
    pub params: serde_json::Value,
    /// Files (globs allowed) whose content is part of the key.
    #[serde(default)]
    pub inputs: Vec<String>,
    /// Files a `command` step produces (kept in the cache and restored).
    #[serde(default)]
    pub outputs: Vec<String>,
    /// The shell command of a `command` step.
    pub run: Option<String>,
    /// Steps this one depends on: `step` (same pipeline) or `pipeline/step`. Instances are joined
    /// on the variables they share.
    #[serde(default)]
    pub needs: Vec<String>,
    /// Named resources this step holds while it runs, e.g. `{device: 1}`.
    #[serde(default)]
    pub resources: BTreeMap<String, u32>,
    /// Wall-clock limit in seconds.
    pub timeout: Option<f64>,
    /// Memory limit of the worker in MiB.
    pub memory_mb: Option<u64>,
    #[serde(default)]
    pub cache: CachePolicy,
    /// A salt: change it to force the step (and its dependants) to run again.
    pub salt: Option<String>,
}

/// One entry of `foreach`, as written: exactly one of `match`, `values` or `grid`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AxisDef {
    /// A path pattern with `{var}` placeholders (each matches one path component; `*` globs).
    #[serde(rename = "match")]
    pub pattern: Option<String>,
    /// With `match`: an empty match is fine (no instances) instead of an error.
    #[serde(default)]
    pub allow_empty: bool,
    /// Explicit values: `{seed: [1, 2, 3]}`.
    pub values: Option<IndexMap<String, Vec<serde_json::Value>>>,
    /// A search-space file (`space.yaml`): one instance per configuration at the current scale;
    /// binds `config` (a stable name) and `config_params` (the parameter object).
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
