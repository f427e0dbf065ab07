//! The context pack of `iterative-ctx`: files under `context/` (a hardware summary per
//! platform, a Pallas API reference, correctness rules, annotated example kernels), chosen per
//! workload by `context/manifest.yaml`:
//!
//! ```yaml
//! always: ["hardware/{platform}.md", pallas_api.md, correctness.md]
//! examples:
//!   default: [examples/rmsnorm.py]
//!   rules:                       # first rule whose glob matches the workload folder name wins
//!     - match: "*GEMM*"
//!       use: [examples/tiled_matmul.py]
//! ```
//! `{platform}` is `tpu`, `gpu` or `cpu`. Markdown files go in as they are; other files go in
//! as fenced code under a heading with their path.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{JbError, Result};
use crate::pipeline::error::{utf8_text, PipelineError};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    #[serde(default)]
    pub always: Vec<String>,
    #[serde(default)]
    pub examples: Examples,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Examples {
    #[serde(default)]
    pub default: Vec<String>,
    #[serde(default)]
    pub rules: Vec<Rule>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    #[serde(rename = "match")]
    pub pattern: String,
    #[serde(rename = "use")]
    pub files: Vec<String>,
}

pub struct ContextPack {
    pub dir: PathBuf,
    pub manifest: Manifest,
}

impl ContextPack {
    pub fn load(dir: &Path) -> Result<ContextPack> {
        let path = dir.join("manifest.yaml");
        let bytes = std::fs::read(&path).map_err(|e| JbError::io(&path, e))?;
        let text = utf8_text(&path, bytes)?;
        let manifest: Manifest = serde_norway::from_str(&text)
            .map_err(|e| PipelineError::from_serde(&path, &text, None, &e))?;
        let pack = ContextPack {
            dir: dir.to_path_buf(),
            manifest,
        };
        // Every file named must exist (for every platform), so a typo fails before any request.
        for rel in pack.all_files() {
            for platform in ["tpu", "gpu", "cpu"] {
                let p = dir.join(rel.replace("{platform}", platform));
                if !p.is_file() {
                    return Err(JbError::Usage(format!(
                        "{}: `{rel}` names {}, which does not exist",
                        path.display(),
                        p.display()
                    )));
                }
            }
        }
        Ok(pack)
    }

    fn all_files(&self) -> Vec<&String> {
        let m = &self.manifest;
        m.always
            .iter()
            .chain(&m.examples.default)
            .chain(m.examples.rules.iter().flat_map(|r| &r.files))
            .collect()
    }

    /// The files for a workload on a platform, in order (relative to the pack's folder).
    pub fn files_for(&self, workload: &str, platform: &str) -> Vec<String> {
        let m = &self.manifest;
        let examples = m
            .examples
            .rules
            .iter()
            .find(|r| {
                glob::Pattern::new(&r.pattern)
                    .map(|p| p.matches(workload))
                    .unwrap_or(false)
            })
            .map(|r| &r.files)
            .unwrap_or(&m.examples.default);
        m.always
            .iter()
            .chain(examples)
            .map(|f| f.replace("{platform}", platform))
            .collect()
    }

    /// The pack's text for a workload on a platform.
    pub fn text_for(&self, workload: &str, platform: &str) -> Result<String> {
        let mut out = String::new();
        for rel in self.files_for(workload, platform) {
            let path = self.dir.join(&rel);
            let body = std::fs::read_to_string(&path).map_err(|e| JbError::io(&path, e))?;
            if rel.ends_with(".md") {
                out.push_str(body.trim_end());
            } else {
                let lang = if rel.ends_with(".py") { "python" } else { "" };
                out.push_str(&format!(
                    "## Example: {rel}\n\n```{lang}\n{}\n```",
                    body.trim_end()
                ));
            }
            out.push_str("\n\n");
        }
        Ok(out.trim_end().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pack() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let w = |p: &str, s: &str| {
            let f = d.path().join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, s).unwrap();
        };
        w(
            "manifest.yaml",
            "always: [\"hardware/{platform}.md\", api.md]\nexamples:\n  default: [examples/a.py]\n  rules:\n    - match: \"*GEMM*\"\n      use: [examples/mm.py]\n",
        );
        for p in ["tpu", "gpu", "cpu"] {
            w(&format!("hardware/{p}.md"), &format!("# HW {p}"));
        }
        w("api.md", "# API");
        w("examples/a.py", "a = 1");
        w("examples/mm.py", "mm = 1");
        d
    }

    #[test]
    fn selection_per_workload_and_platform() {
        let d = pack();
        let p = ContextPack::load(d.path()).unwrap();
        assert_eq!(
            p.files_for("8p_GEMM", "gpu"),
            ["hardware/gpu.md", "api.md", "examples/mm.py"]
        );
        assert_eq!(
            p.files_for("12p_RMSNorm", "cpu"),
            ["hardware/cpu.md", "api.md", "examples/a.py"]
        );
        let t = p.text_for("12p_RMSNorm", "tpu").unwrap();
        assert!(t.starts_with(
            "# HW tpu\n\n# API\n\n## Example: examples/a.py\n\n```python\na = 1\n```"
        ));
    }

    #[test]
    fn missing_file_is_an_error() {
        let d = pack();
        std::fs::remove_file(d.path().join("hardware/gpu.md")).unwrap();
        let e = ContextPack::load(d.path()).err().unwrap().to_string();
        assert!(e.contains("hardware/gpu.md"), "{e}");
    }

    #[test]
    fn the_repository_pack_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("context");
        let p = ContextPack::load(&dir).unwrap();
        for wl in [
            "12p_RMSNorm",
            "8p_GEMM",
            "1p_Flash_Attention",
            "41k_Gemm_Add_ReLU",
        ] {
            for platform in ["tpu", "gpu", "cpu"] {
                let t = p.text_for(wl, platform).unwrap();
                assert!(t.contains("pallas_call"), "{wl} {platform}");
            }
        }
    }
}
