//! Admission: which runnable steps may start now. Slots (`-j`), named resources (counting
//! semaphores; `device` has one unit per device) and, on backends where a measurement needs the
//! whole machine, an exclusive mode. Each device unit is also a lock file, so measurements of
//! two jb processes on one machine never overlap (see `locks`).

use std::collections::BTreeMap;

use crate::pipeline::{Step, StepKind};

/// What a step holds while it runs.
#[derive(Debug, Clone, Default)]
pub struct Grant {
    needs: Vec<(String, u32)>,
    exclusive: bool,
    /// Device units held (their lock files are taken by the step's task).
    pub devices: Vec<u32>,
}

pub struct Admission {
    jobs: usize,
    /// Every Python worker step but `export` holds a device unit (an accelerator backend: a
    /// worker that opens the backend owns its chip, so one judge per device).
    device_bound: bool,
    running: usize,
    exclusive_running: bool,
    exclusive_measurements: bool,
    free: BTreeMap<String, u32>,
    /// Device units in use.
    devices_busy: Vec<bool>,
}

/// Whether a step holds a device unit while it runs: a measurement always; with `device_bound`
/// (TPU, GPU) every step a Python worker runs on the backend — compile, verify, profile — but
/// not `export`, which the sandbox runs on the CPU for the target platform.
pub fn uses_device(step: &Step, device_bound: bool) -> bool {
    step.kind.is_measurement()
        || (device_bound && step.kind.uses_python() && step.kind != StepKind::Export)
}

/// The resources a step needs: its declared ones, plus one device for a measurement (or, with
/// `device_bound`, for every step that opens the backend).
pub fn needs(step: &Step, device_bound: bool) -> Vec<(String, u32)> {
    let mut needs: Vec<(String, u32)> = step
        .resources
        .iter()
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    if uses_device(step, device_bound) && !step.resources.contains_key("device") {
        needs.push(("device".into(), 1));
    }
    needs
}

impl Admission {
    pub fn new(
        jobs: usize,
        devices: u32,
        exclusive_measurements: bool,
        device_bound: bool,
    ) -> Admission {
        let devices = devices.max(1);
        Admission {
            jobs: jobs.max(1),
            device_bound,
            running: 0,
            exclusive_running: false,
            exclusive_measurements,
            free: BTreeMap::from([("device".to_string(), devices)]),
            devices_busy: vec![false; devices as usize],
        }
    }

    /// Start `step` if it fits now.
    pub fn try_admit(&mut self, step: &Step) -> Option<Grant> {
        let exclusive = self.exclusive_measurements && step.kind.is_measurement();
        let needs = needs(step, self.device_bound);
        let fits = self.running < self.jobs
            && !self.exclusive_running
            && (!exclusive || self.running == 0)
            && needs
                .iter()
                .all(|(r, n)| self.free.get(r).copied().unwrap_or(u32::MAX) >= *n);
        if !fits {
            return None;
        }
        let mut devices = Vec::new();
        for (r, n) in &needs {
            if let Some(f) = self.free.get_mut(r) {
                *f -= n;
            }
            if r == "device" {
                for _ in 0..*n {
                    if let Some(u) = self.devices_busy.iter().position(|b| !b) {
                        self.devices_busy[u] = true;
                        devices.push(u as u32);
                    }
                }
            }
        }
        self.running += 1;
        self.exclusive_running |= exclusive;
        Some(Grant {
            needs,
            exclusive,
            devices,
        })
    }

    pub fn release(&mut self, grant: &Grant) {
        for (r, n) in &grant.needs {
            if let Some(f) = self.free.get_mut(r) {
                *f += n;
            }
        }
        for &u in &grant.devices {
            self.devices_busy[u as usize] = false;
        }
        self.running -= 1;
        if grant.exclusive {
            self.exclusive_running = false;
        }
    }
}
