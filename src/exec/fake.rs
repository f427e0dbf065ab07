//! A fake executor for engine tests: no processes, scripted outcomes, a log of what ran.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Value};

use super::{Executor, StepOutput, StepRequest};

#[derive(Debug, Clone)]
pub enum FakeBehavior {
    /// Succeed with this result.
    Output(Value),
    /// Fail with this status.
    Fail(String),
    /// An infrastructure failure (not cached).
    Crash,
    /// Sleep, then succeed.
    Sleep(Duration),
}

#[derive(Debug, Default)]
pub struct FakeExecutor {
    behaviors: Mutex<HashMap<String, FakeBehavior>>,
    /// Step ids in the order they were executed.
    pub log: Mutex<Vec<String>>,
    /// (step id, device unit it held) for every executed step.
    pub devices: Mutex<Vec<(String, Option<u32>)>>,
    /// (step id, the device peak its request carried) for every executed step.
    pub peaks: Mutex<Vec<(String, Option<Value>)>>,
    /// Steps running at this moment per device unit, and the most seen at once on any unit.
    busy: Mutex<(HashMap<u32, u32>, u32)>,
}

impl FakeExecutor {
    pub fn new() -> Self {
        Self::default()
    }

    /// Script the step whose id is `id` (or whose id starts with `id` followed by `[`).
    pub fn on(&self, id: &str, b: FakeBehavior) {
        self.behaviors.lock().unwrap().insert(id.to_string(), b);
    }

    pub fn executed(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    pub fn clear_log(&self) {
        self.log.lock().unwrap().clear();
        self.devices.lock().unwrap().clear();
        self.peaks.lock().unwrap().clear();
        *self.busy.lock().unwrap() = Default::default();
    }

    /// The most steps that ever ran at once holding the same device unit.
    pub fn max_per_device(&self) -> u32 {
        self.busy.lock().unwrap().1
    }
}

impl Executor for FakeExecutor {
    fn execute(&self, req: &StepRequest) -> StepOutput {
        self.log.lock().unwrap().push(req.step.id.clone());
        self.devices
            .lock()
            .unwrap()
            .push((req.step.id.clone(), req.device));
        self.peaks
            .lock()
            .unwrap()
            .push((req.step.id.clone(), req.peak.clone()));
        if let Some(u) = req.device {
            let mut b = self.busy.lock().unwrap();
            let n = {
                let c = b.0.entry(u).or_default();
                *c += 1;
                *c
            };
            b.1 = b.1.max(n);
        }
        let out = self.behave(req);
        if let Some(u) = req.device {
            *self.busy.lock().unwrap().0.entry(u).or_default() -= 1;
        }
        out
    }
}

impl FakeExecutor {
    fn behave(&self, req: &StepRequest) -> StepOutput {
        let behavior = {
            let b = self.behaviors.lock().unwrap();
            b.get(&req.step.id)
                .or_else(|| b.get(req.step.id.split('[').next().unwrap_or("")))
                .cloned()
        };
        let default = || {
            StepOutput::new(
                "ok",
                json!({"params": req.step.params, "deps": req.deps.iter().map(|d| d.step_id.clone()).collect::<Vec<_>>()}),
            )
        };
        match behavior {
            // Built-in kinds are pure functions of upstream results: run the real ones.
            None if req.step.kind == crate::pipeline::StepKind::Grid => super::builtin::grid(req),
            None if req.step.kind == crate::pipeline::StepKind::Aggregate => {
                super::builtin::aggregate(req)
            }
            None => default(),
            Some(FakeBehavior::Output(v)) => StepOutput::new("ok", v),
            Some(FakeBehavior::Fail(status)) => {
                StepOutput::new(status, json!({"reasons": ["scripted failure"]}))
            }
            Some(FakeBehavior::Crash) => StepOutput::infra("crashed", "scripted crash"),
            Some(FakeBehavior::Sleep(d)) => {
                std::thread::sleep(d);
                default()
            }
        }
    }
}
