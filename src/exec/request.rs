//! The arguments of a worker op for a step: one builder for every executor (local workers and
//! Ray's judges), so both sides of the boundary get the same request.

use serde_json::{json, Map, Value};

use super::{StepOutput, StepRequest};
use crate::pipeline::StepKind;

/// The op's arguments: the step's params, `impl` replaced by `imp` when given, and what jb
/// adds: `scale`, `backend`, `out_dir`, `project_root`, the device `peak` (profile steps),
/// `upstream` results. A step whose params are not a mapping fails here.
pub fn worker_args(
    req: &StepRequest,
    imp: Option<Value>,
) -> Result<Map<String, Value>, StepOutput> {
    let mut args = match &req.step.params {
        Value::Object(m) => m.clone(),
        Value::Null => Map::new(),
        other => {
            return Err(StepOutput::new(
                "failed",
                json!({"reasons": [format!("params must be a mapping, got {other}")]}),
            ));
        }
    };
    if let Some(imp) = imp {
        args.insert("impl".into(), imp);
    }
    args.insert("scale".into(), json!(req.scale));
    args.insert("backend".into(), json!(req.backend));
    args.insert("out_dir".into(), json!(req.out_dir));
    args.insert("project_root".into(), json!(req.project.root));
    if req.step.kind == StepKind::Profile {
        if let Some(p) = &req.peak {
            args.entry("peak").or_insert_with(|| p.clone());
        }
    }
    // Upstream results the op may use (e.g. the reference's FLOPs for a kernel's profile).
    args.insert(
        "upstream".into(),
        Value::Array(
            req.deps
                .iter()
                .map(|d| json!({"step": d.step_id, "kind": d.kind, "status": d.status, "result": d.result}))
                .collect(),
        ),
    );
    Ok(args)
}
