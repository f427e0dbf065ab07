//! The project's own settings file, `jb.yaml` at the project root (optional).
//!
//! ```yaml
//! executor: ray            # local (default) | ray
//! ray:
//!   address: 10.0.0.2:6379 # the head node's GCS address (`ray start --head --port 6379`)
//!   device_resource: TPU   # the Ray resource one accelerator is (default by backend: TPU, GPU, device)
//!   cpu_slots: 1           # judges per node on a cluster without that resource
//!   max_attempts: 3        # tries of a step whose node is lost
//! ```
//! Command-line options and environment variables (`JB_EXECUTOR`, `JB_RAY_ADDRESS`) win over it.

use std::path::Path;

use serde::Deserialize;

use crate::error::{JbError, Result};
use crate::pipeline::error::{utf8_text, PipelineError};

pub const FILE: &str = "jb.yaml";

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectConfig {
    pub executor: Option<String>,
    #[serde(default)]
    pub ray: RaySettings,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RaySettings {
    pub address: Option<String>,
    pub device_resource: Option<String>,
    pub cpu_slots: Option<u32>,
    pub max_attempts: Option<u32>,
}

impl ProjectConfig {
    /// `jb.yaml` of the project root; defaults when there is none.
    pub fn load(root: &Path) -> Result<ProjectConfig> {
        let path = root.join(FILE);
        let text = match std::fs::read(&path) {
            Ok(bytes) => utf8_text(&path, bytes)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(ProjectConfig::default())
            }
            Err(e) => return Err(JbError::io(&path, e)),
        };
        if text.trim().is_empty() {
            return Ok(ProjectConfig::default());
        }
        Ok(serde_norway::from_str(&text)
            .map_err(|e| PipelineError::from_serde(&path, &text, None, &e))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_settings_and_rejects_unknown_fields() {
        let dir = tempfile::tempdir().unwrap();
        assert!(ProjectConfig::load(dir.path()).unwrap().executor.is_none());
        std::fs::write(
            dir.path().join(FILE),
            "executor: ray\nray:\n  address: 1.2.3.4:6379\n  cpu_slots: 2\n",
        )
        .unwrap();
        let c = ProjectConfig::load(dir.path()).unwrap();
        assert_eq!(c.executor.as_deref(), Some("ray"));
        assert_eq!(c.ray.address.as_deref(), Some("1.2.3.4:6379"));
        assert_eq!(c.ray.cpu_slots, Some(2));
        std::fs::write(dir.path().join(FILE), "ray:\n  adress: x\n").unwrap();
        let e = ProjectConfig::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("jb.yaml:2"), "{e}");
        assert!(e.contains("adress"), "{e}");
    }
}
