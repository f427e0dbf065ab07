//! Which accelerator this machine has, read from its device nodes (no JAX needed): what
//! `jb setup` and every command use when `--backend` is not given, so a TPU VM or a GPU box
//! gets the TPU or GPU environment instead of silently running Pallas in interpret mode.

use std::path::Path;

use super::Platform;

/// The accelerator of this machine: TPU when `/dev/accel*` or a Google vfio device is present,
/// GPU when `/dev/nvidia0` (or the NVIDIA driver's proc file) is; `JB_DETECT_ROOT` roots the
/// lookup elsewhere (tests).
pub fn accelerator() -> Option<Platform> {
    let root = std::env::var_os("JB_DETECT_ROOT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "/".into());
    accelerator_at(&root)
}

pub fn accelerator_at(root: &Path) -> Option<Platform> {
    let dev = root.join("dev");
    let has_prefix = |dir: &Path, prefix: &str| {
        std::fs::read_dir(dir).is_ok_and(|rd| {
            rd.flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with(prefix))
        })
    };
    if has_prefix(&dev, "accel") || google_vfio(root) {
        return Some(Platform::Tpu);
    }
    if dev.join("nvidia0").exists() || root.join("proc/driver/nvidia/version").exists() {
        return Some(Platform::Gpu);
    }
    None
}

/// A vfio-bound PCI device of Google's vendor id (0x1ae0): a TPU v5e/v5p/v6e chip.
fn google_vfio(root: &Path) -> bool {
    if !root.join("dev/vfio").is_dir() {
        return false;
    }
    let Ok(devices) = std::fs::read_dir(root.join("sys/bus/pci/devices")) else {
        return false;
    };
    devices.flatten().any(|d| {
        std::fs::read_to_string(d.path().join("vendor")).is_ok_and(|v| v.trim() == "0x1ae0")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_nodes_decide() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(accelerator_at(t.path()), None);
        std::fs::create_dir_all(t.path().join("dev")).unwrap();
        std::fs::write(t.path().join("dev/nvidia0"), "").unwrap();
        assert_eq!(accelerator_at(t.path()), Some(Platform::Gpu));
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("dev/vfio")).unwrap();
        assert_eq!(accelerator_at(t.path()), None, "vfio alone is not a TPU");
        let pci = t.path().join("sys/bus/pci/devices/0000:00:04.0");
        std::fs::create_dir_all(&pci).unwrap();
        std::fs::write(pci.join("vendor"), "0x1ae0\n").unwrap();
        assert_eq!(accelerator_at(t.path()), Some(Platform::Tpu));
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("dev")).unwrap();
        std::fs::write(t.path().join("dev/accel0"), "").unwrap();
        assert_eq!(accelerator_at(t.path()), Some(Platform::Tpu));
    }
}
