//! Answers read from a folder (replaying recorded answers, or hand-written ones).
//!
//! For workload `W` (folder name, e.g. `12p_RMSNorm`, or its id `12p`) and a sample with tag `T`
//! and number `n`, the first of these that exists is the answer:
//! 1. `DIR/W/T.md`, `DIR/W/T.txt`, `DIR/W/T.py`;
//! 2. the files of `DIR/W/`, sorted by name: file `n mod count`;
//! 3. `DIR/W.md`, `DIR/W.txt`, `DIR/W.py`.
//!
//! A `.py` file is the code itself (it is wrapped in a ```python block); other files are answers
//! as a model would write them.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde_json::{json, Value};

use super::agent::{Agent, AgentError, ChatRequest, Completion};
use crate::exec::CancelFlag;

pub struct FileAgent {
    pub dir: PathBuf,
    reads: AtomicU64,
}

const EXTS: [&str; 3] = ["md", "txt", "py"];

impl FileAgent {
    pub fn new(dir: &Path) -> Self {
        FileAgent {
            dir: dir.to_path_buf(),
            reads: AtomicU64::new(0),
        }
    }

    /// The file that answers a sample, if any.
    pub fn answer_file(&self, workload: &str, tag: &str, number: usize) -> Option<PathBuf> {
        let id = workload.split('_').next().unwrap_or(workload);
        let names: Vec<&str> = if id == workload {
            vec![workload]
        } else {
            vec![workload, id]
        };
        for name in &names {
            let folder = self.dir.join(name);
            for ext in EXTS {
                let p = folder.join(format!("{tag}.{ext}"));
                if p.is_file() {
                    return Some(p);
                }
            }
            if folder.is_dir() {
                let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
                    .ok()?
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        p.is_file()
                            && !p
                                .file_name()
                                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                    })
                    .collect();
                files.sort();
                if !files.is_empty() {
                    return Some(files[number % files.len()].clone());
                }
            }
        }
        for name in &names {
            for ext in EXTS {
                let p = self.dir.join(format!("{name}.{ext}"));
                if p.is_file() {
                    return Some(p);
                }
            }
        }
        None
    }
}

impl Agent for FileAgent {
    fn identity(&self) -> Value {
        json!({"kind": "files", "dir": self.dir.to_string_lossy()})
    }

    fn caches(&self) -> bool {
        false
    }

    fn describe(&self) -> String {
        format!("answers in {}", self.dir.display())
    }

    fn requests_sent(&self) -> u64 {
        self.reads.load(Ordering::SeqCst)
    }

    fn complete(&self, req: &ChatRequest, _cancel: &CancelFlag) -> Result<Completion, AgentError> {
        let started = Instant::now();
        let path = self
            .answer_file(req.workload, req.tag, req.number)
            .ok_or_else(|| {
                AgentError::Answers(format!(
                    "no answer for {} (sample {}) in {}",
                    req.workload,
                    req.tag,
                    self.dir.display()
                ))
            })?;
        self.reads.fetch_add(1, Ordering::SeqCst);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| AgentError::Answers(format!("{}: {e}", path.display())))?;
        let content = if path.extension().is_some_and(|e| e == "py") {
            format!("```python\n{}\n```\n", text.trim_end())
        } else {
            text
        };
        Ok(Completion {
            content,
            model: Some(format!("file:{}", path.display())),
            finish_reason: Some("stop".into()),
            usage: Value::Null,
            attempts: 1,
            elapsed: started.elapsed(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_order() {
        let d = tempfile::tempdir().unwrap();
        let w = d.path().join("12p_RMSNorm");
        std::fs::create_dir_all(&w).unwrap();
        std::fs::write(w.join("a.md"), "A").unwrap();
        std::fs::write(w.join("b.py"), "B").unwrap();
        std::fs::write(w.join("c0.t1.md"), "exact").unwrap();
        std::fs::write(d.path().join("8p.py"), "x = 1").unwrap();
        let a = FileAgent::new(d.path());
        let f = |wl: &str, tag: &str, n: usize| {
            a.answer_file(wl, tag, n)
                .map(|p| p.file_name().unwrap().to_string_lossy().to_string())
        };
        assert_eq!(f("12p_RMSNorm", "c0.t1", 0).as_deref(), Some("c0.t1.md"));
        assert_eq!(f("12p_RMSNorm", "0", 0).as_deref(), Some("a.md"));
        assert_eq!(f("12p_RMSNorm", "1", 1).as_deref(), Some("b.py"));
        assert_eq!(f("12p_RMSNorm", "4", 4).as_deref(), Some("b.py"));
        assert_eq!(f("8p_GEMM", "0", 0).as_deref(), Some("8p.py"));
        assert_eq!(f("1p_Flash", "0", 0), None);
        let s = crate::agent::Sampling::default();
        let c = a
            .complete(
                &ChatRequest {
                    system: "",
                    user: "",
                    sampling: &s,
                    workload: "8p_GEMM",
                    tag: "0",
                    number: 0,
                },
                &CancelFlag::default(),
            )
            .unwrap();
        assert_eq!(c.content, "```python\nx = 1\n```\n");
    }
}
