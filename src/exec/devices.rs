//! Which device a worker may open: one pooled judge per device on an accelerator backend.
//!
//! libtpu lets one process own a TPU chip set, and each JAX process on a GPU preallocates 75 % of
//! its memory by default; so on TPU and GPU every worker is started for one device unit (the one
//! its step holds, see `engine::admission`), with the environment that makes it see only that
//! chip, and GPU preallocation off (allocation grows with use).

/// The backend's devices and how a worker is pinned to one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceBinding {
    /// `cpu`, `gpu` or `tpu`.
    pub backend: String,
    /// How many devices the backend has (the fingerprint's `device_count`).
    pub count: u32,
    /// The fingerprint's `device_kind` (`TPU v6 lite`, `NVIDIA H200`): the abstract device the
    /// export stage serializes for.
    pub kind: Option<String>,
}

impl DeviceBinding {
    pub fn new(backend: &str, count: u32) -> DeviceBinding {
        DeviceBinding {
            backend: backend.to_string(),
            count: count.max(1),
            kind: None,
        }
    }

    pub fn with_kind(mut self, kind: Option<&str>) -> DeviceBinding {
        self.kind = kind.map(str::to_string);
        self
    }

    /// Whether the backend is an accelerator (steps that open it hold a device unit).
    pub fn accelerator(&self) -> bool {
        matches!(self.backend.as_str(), "gpu" | "tpu")
    }

    /// The environment of the export stage's worker on an accelerator backend: JAX on CPU only
    /// (it serializes for the target without opening it, so it never fights the judge that owns
    /// a TPU, nor takes GPU memory); nothing on CPU.
    pub fn export_env(&self) -> Vec<(String, String)> {
        if self.accelerator() {
            vec![("JAX_PLATFORMS".into(), "cpu".into())]
        } else {
            Vec::new()
        }
    }

    /// The environment of a worker for `unit` (none: a worker that holds no device).
    pub fn env(&self, unit: Option<u32>) -> Vec<(String, String)> {
        let mut env = Vec::new();
        match self.backend.as_str() {
            "gpu" => {
                env.push(("XLA_PYTHON_CLIENT_PREALLOCATE".into(), "false".into()));
                if let Some(u) = unit {
                    env.push(("CUDA_VISIBLE_DEVICES".into(), u.to_string()));
                }
            }
            "tpu" => {
                // One chip per process (JAX's recipe for several processes on one TPU host).
                // With a single chip the defaults already give it to the one worker.
                if let (Some(u), true) = (unit, self.count > 1) {
                    env.push(("TPU_VISIBLE_CHIPS".into(), u.to_string()));
                    env.push(("TPU_CHIPS_PER_PROCESS_BOUNDS".into(), "1,1,1".into()));
                    env.push(("TPU_PROCESS_BOUNDS".into(), "1,1,1".into()));
                    env.push(("TPU_PROCESS_PORT".into(), (8476 + u).to_string()));
                    env.push((
                        "TPU_PROCESS_ADDRESSES".into(),
                        format!("localhost:{}", 8476 + u),
                    ));
                }
            }
            _ => {}
        }
        env
    }

    /// Whether one process owns the device exclusively (TPU): a sandboxed step that must use the
    /// chip first stops that device's idle judge.
    pub fn exclusive_owner(&self) -> bool {
        self.backend == "tpu"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_see_only_their_device() {
        let gpu = DeviceBinding::new("gpu", 8);
        let env = gpu.env(Some(3));
        assert!(env.contains(&("CUDA_VISIBLE_DEVICES".into(), "3".into())));
        assert!(env.contains(&("XLA_PYTHON_CLIENT_PREALLOCATE".into(), "false".into())));
        assert!(!gpu.exclusive_owner());
        let tpu = DeviceBinding::new("tpu", 4);
        let env = tpu.env(Some(2));
        assert!(env.contains(&("TPU_VISIBLE_CHIPS".into(), "2".into())));
        assert!(env.contains(&("TPU_PROCESS_BOUNDS".into(), "1,1,1".into())));
        assert!(tpu.exclusive_owner());
        assert!(DeviceBinding::new("tpu", 1).env(Some(0)).is_empty());
        assert!(DeviceBinding::new("cpu", 1).env(Some(0)).is_empty());
        // Two units never share a TPU process port.
        let port = |u| {
            tpu.env(Some(u))
                .into_iter()
                .find(|(k, _)| k == "TPU_PROCESS_PORT")
                .unwrap()
                .1
        };
        assert_ne!(port(0), port(1));
    }

    #[test]
    fn the_export_stage_never_opens_the_accelerator() {
        let cpu_only = vec![("JAX_PLATFORMS".to_string(), "cpu".to_string())];
        assert_eq!(DeviceBinding::new("tpu", 4).export_env(), cpu_only);
        assert_eq!(DeviceBinding::new("gpu", 1).export_env(), cpu_only);
        assert!(DeviceBinding::new("cpu", 1).export_env().is_empty());
        let b = DeviceBinding::new("tpu", 1).with_kind(Some("TPU v5 lite"));
        assert_eq!(b.kind.as_deref(), Some("TPU v5 lite"));
    }
}
