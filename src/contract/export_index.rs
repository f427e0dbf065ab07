//! `export/index.json`: what the export stage (candidate code, sandboxed) says it wrote. Nothing
//! in it is trusted but its shape: the judge re-derives every claim from the programs themselves;
//! a file of another format version is refused.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::{check_version, from_value, ContractError};

/// The version of the index (`EXPORT_INDEX_FORMAT` in `python/jb/contract.py`).
pub const FORMAT: u32 = 1;
const BOUNDARY: &str = "export index";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportedProgram {
    pub file: String,
    /// The CONFIG override this program is for (`None`: the scale's own shapes).
    pub variant: Option<Map<String, Value>>,
    pub in_avals: Vec<Value>,
    #[serde(rename = "static")]
    pub static_: Value,
    pub has_pallas_call: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interpret_mode: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportIndex {
    pub format: u32,
    pub platform: String,
    pub backend: String,
    pub scale: String,
    pub jax: String,
    pub programs: Vec<ExportedProgram>,
    pub failed: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jaxlib: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_kind: Option<String>,
}

impl ExportIndex {
    pub fn decode(v: Value) -> Result<ExportIndex, ContractError> {
        let i: ExportIndex = from_value(BOUNDARY, v)?;
        check_version(BOUNDARY, "format", FORMAT, i.format)?;
        Ok(i)
    }
}

pub(super) fn samples() -> Vec<Value> {
    vec![json!({"kind": "export_index", "message": ExportIndex {
        format: FORMAT, platform: "cpu".into(), backend: "cpu".into(), scale: "tiny".into(),
        jax: "0.12.0.1".into(), failed: vec![], jaxlib: Some("0.12.0.1".into()), device_kind: None,
        programs: vec![ExportedProgram {
            file: "program-0.jaxexport".into(), variant: None,
            in_avals: vec![json!([[8, 128], "bfloat16"])], static_: json!({}),
            has_pallas_call: true, interpret_mode: Some("pallas".into()) }] }})]
}
