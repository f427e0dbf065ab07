//! `jb tune`'s plan: the configurations the grid search of the hand-tuned baselines
//! (`pipelines/tune.yaml`) profiles, one per `tune/profile` instance.

use serde::Serialize;
use serde_json::Value;

use crate::pipeline::PipelineSet;

/// One configuration, as `jb tune --dry-run --json` prints it (field order is the output's).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TuneConfig {
    pub workload: Option<String>,
    /// The parameter object (`config_params`).
    pub config: Option<Value>,
    /// The configuration's stable name (`config`).
    pub name: Option<Value>,
    pub scale: String,
}

impl TuneConfig {
    /// The configuration's name as text (empty when it has none).
    pub fn name_str(&self) -> &str {
        self.name.as_ref().and_then(Value::as_str).unwrap_or("")
    }
}

/// The configurations of `workloads` (every workload when empty) at `scale`, in step order.
pub fn configurations(set: &PipelineSet, workloads: &[String], scale: &str) -> Vec<TuneConfig> {
    set.steps
        .iter()
        .filter(|s| s.pipeline == "tune" && s.name == "profile")
        .filter(|s| {
            workloads.is_empty()
                || s.workload()
                    .is_some_and(|w| workloads.iter().any(|x| x == w))
        })
        .map(|s| TuneConfig {
            workload: s.workload().map(str::to_string),
            config: s.vars.get("config_params").cloned(),
            name: s.vars.get("config").cloned(),
            scale: scale.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_keys_in_order() {
        let c = TuneConfig {
            workload: Some("8p_GEMM".into()),
            config: Some(json!({"block_m": 128})),
            name: Some(json!("block_m=128")),
            scale: "cpu".into(),
        };
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"workload":"8p_GEMM","config":{"block_m":128},"name":"block_m=128","scale":"cpu"}"#
        );
        assert_eq!(c.name_str(), "block_m=128");
        let none = TuneConfig {
            workload: None,
            config: None,
            name: None,
            scale: "paper".into(),
        };
        assert_eq!(
            serde_json::to_string(&none).unwrap(),
            r#"{"workload":null,"config":null,"name":null,"scale":"paper"}"#
        );
    }
}
