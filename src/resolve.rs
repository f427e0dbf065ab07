//! Naming workloads on the command line: a folder name (`12p_RMSNorm`) or its id (`12p`).

use crate::error::{JbError, Result};
use crate::pipeline::paths::match_pattern;
use crate::project::Project;

pub fn workload(project: &Project, name: &str) -> Result<String> {
    let all: Vec<String> = match_pattern(&project.root, "workloads/{workload}/workload.py")
        .into_iter()
        .map(|(_, v)| v["workload"].clone())
        .collect();
    if let Some(w) = all
        .iter()
        .find(|w| *w == name || w.split('_').next() == Some(name))
    {
        return Ok(w.clone());
    }
    Err(JbError::Usage(format!(
        "unknown workload `{name}`{}; see `jb list workloads` (e.g. `12p` or `12p_RMSNorm`)",
        crate::suggest::did_you_mean(name, all.iter().map(String::as_str))
    )))
}
