//! The `command` step: a shell command with declared inputs and outputs.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::json;

use super::child::{self, Ended};
use super::stderr_tail::StderrTail;
use super::{StepOutput, StepRequest};

/// The shell by its path (as make does: no search of PATH in every step's child), looked up
/// once per process.
fn shell() -> &'static str {
    static SHELL: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
    SHELL.get_or_init(|| {
        if Path::new("/bin/sh").exists() {
            "/bin/sh"
        } else {
            "sh"
        }
    })
}

pub fn run(req: &StepRequest) -> StepOutput {
    let Some(script) = req.step.run.as_deref() else {
        return StepOutput::new("failed", json!({"reasons": ["command step without `run`"]}));
    };
    let root = &req.project.root;
    for o in &req.step.outputs {
        if let Some(parent) = root.join(o).parent() {
            let _ = std::fs::create_dir_all(parent);
        }
    }
    let mut cmd = Command::new(shell());
    // The step's variables, also as environment variables (`"$JB_VAR_workload"`): the `run:`
    // text has them shell-quoted already (see `pipeline::template::fill_shell`).
    for (k, v) in &req.step.vars {
        if k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            let text = crate::pipeline::template::var_string(v);
            if !text.contains('\0') {
                cmd.env(format!("JB_VAR_{k}"), text);
            }
        }
    }
    cmd.arg("-c")
        .arg(script)
        .current_dir(root)
        .env("JB_STEP", &req.step.id)
        .env("JB_OUT_DIR", &req.out_dir)
        .env("JB_SCALE", &req.scale)
        .env("JB_BACKEND", &req.backend)
        .stdin(Stdio::null())
        // stdout is not kept (it never was); the end of stderr is, for a failure's report.
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    let start = std::time::Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return StepOutput::infra("error", format!("cannot start `sh`: {e}")),
    };
    let stderr = StderrTail::start(child.stderr.take().expect("piped stderr"));
    let ended = child::wait(child, req.timeout, req.memory_mb, &req.cancel);
    let duration_ms = start.elapsed().as_secs_f64() * 1e3;
    match ended {
        Ended::Exited(status) if status.success() => {
            let mut files = BTreeMap::new();
            let real_root = root.canonicalize().unwrap_or_else(|_| root.clone());
            for o in &req.step.outputs {
                let p = root.join(o);
                // The command may have made a folder of an output a symbolic link: an output
                // is read (and later restored) only where the pipeline said it is.
                if Path::new(o).is_relative() {
                    let expected = crate::pipeline::paths::lexical(&real_root.join(o));
                    if let Ok(real) = p.canonicalize() {
                        if real != expected {
                            return StepOutput::new(
                                "failed",
                                json!({"reasons": [format!("declared output `{o}` leads through a symbolic link to {}", real.display())], "duration_ms": duration_ms}),
                            );
                        }
                    }
                }
                if !p.is_file() {
                    return StepOutput::new(
                        "failed",
                        json!({"reasons": [format!("declared output `{o}` was not produced")], "duration_ms": duration_ms}),
                    );
                }
                files.insert(o.clone(), p);
            }
            let mut o = StepOutput::new("ok", json!({"exit_code": 0, "duration_ms": duration_ms}));
            o.files = files;
            o
        }
        Ended::Exited(status) => StepOutput::new(
            "failed",
            json!({
                "exit_code": status.code(),
                "reasons": [format!("command exited with {status}")],
                "stderr_tail": stderr.lines(20, std::time::Duration::from_secs(1)),
                "duration_ms": duration_ms,
            }),
        ),
        Ended::TimedOut => StepOutput::infra(
            "timeout",
            format!(
                "command exceeded its {:?} timeout",
                req.timeout.unwrap_or_default()
            ),
        ),
        Ended::Cancelled => StepOutput::infra("cancelled", "interrupted"),
        Ended::OutOfMemory { rss_mb } => {
            StepOutput::infra("crashed", format!("memory limit exceeded ({rss_mb} MiB)"))
        }
    }
}
