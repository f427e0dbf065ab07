//! The device table, the one owner of device facts: what the prompt tells the model about the
//! target (`agent::prompt`, `agent::hardware` re-exports this module), and the published peaks
//! the report's roofline and the profile step's guard use (`report::peaks`). [`roofline`] holds
//! the one computation of achieved TFLOP/s and utilisation. Figures are
//! public per-chip numbers (dense bf16 peak, HBM capacity and bandwidth); `None` where a figure
//! does not apply.

use std::collections::BTreeMap;

pub mod detect;
pub mod roofline;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    Tpu,
    Gpu,
    Cpu,
}

impl Platform {
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Tpu => "tpu",
            Platform::Gpu => "gpu",
            Platform::Cpu => "cpu",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Device {
    /// `--target` name.
    pub id: &'static str,
    pub name: &'static str,
    /// The name reports use.
    pub short_name: &'static str,
    /// Lower-case fragments of JAX `device_kind` strings naming this device (first match in
    /// table order wins); empty for the generic rows.
    pub kinds: &'static [&'static str],
    pub platform: Platform,
    /// Dense bf16 matrix peak, TFLOP/s per chip.
    pub bf16_tflops: Option<f64>,
    pub hbm_gib: Option<f64>,
    pub hbm_gbps: Option<f64>,
    /// Compute units and on-chip memory, in words.
    pub compute: &'static str,
    pub on_chip: &'static str,
    /// What matters when writing a Pallas kernel for it.
    pub notes: &'static [&'static str],
}

impl Device {
    /// FLOP per byte above which a kernel is compute-bound.
    pub fn ridge_point(&self) -> Option<f64> {
        Some(self.bf16_tflops? * 1e12 / (self.hbm_gbps? * 1e9))
    }
}

const TPU_NOTES: &[&str] = &[
    "Pallas lowers to Mosaic on TPU: use `jax.experimental.pallas` (`pl`) with `jax.experimental.pallas.tpu` (`pltpu`) for compiler parameters, scratch buffers and grid specs.",
    "A block's last two dimensions must be multiples of (8, 128) for 32-bit types and (16, 128) for bf16, or span the whole array dimension; lane-dense (last dimension a multiple of 128) outputs avoid masked stores.",
    "The grid runs sequentially on a TensorCore; HBM->VMEM copies of the next block are pipelined behind the current block's compute, so blocks must fit in VMEM twice (double buffering) together with scratch.",
    "The matrix unit wants bf16 operands and f32 accumulation (`preferred_element_type=jnp.float32`); keep reductions and normalisations in f32.",
    "Mark independent grid axes `parallel` and reduction axes `arbitrary` in `pltpu.CompilerParams(dimension_semantics=...)`; raise `vmem_limit_bytes` only when large blocks need it.",
];

const GPU_NOTES: &[&str] = &[
    "Pallas lowers through Triton on NVIDIA GPUs: write `pl.pallas_call` kernels with `pl.BlockSpec` blocks and tune `jax.experimental.pallas.triton.CompilerParams(num_warps=..., num_stages=...)`; TPU-only APIs (`pltpu`) do not exist here.",
    "Block shapes must be powers of two; one grid program runs per block on one streaming multiprocessor, so the grid should have at least as many programs as there are SMs.",
    "Tensor cores want bf16 operands with f32 accumulation (`preferred_element_type=jnp.float32`); keep reductions in f32.",
    "Each program's blocks live in registers and shared memory: oversized blocks spill and lose occupancy; 64-256 per dimension is typical.",
];

const CPU_NOTES: &[&str] = &[
    "There is no accelerator: the harness runs every `pallas_call` in interpret mode on the host CPU, so the kernel is checked for correctness exactly as on a TPU, and timed as interpreted code.",
    "Write the kernel with the TPU Pallas API (`pl` plus `pltpu` compiler parameters and scratch shapes); the interpreter accepts it.",
    "Each grid step is one iteration of an interpreted loop with its own copies of the blocks: few, large blocks run much faster than many small ones; the timings say how the kernel is structured, not how fast a TPU would run it.",
    "Numerics follow the TPU rules: bf16 inputs, f32 accumulation and f32 normalisation statistics.",
];

/// Every device the prompt knows.
pub const DEVICES: &[Device] = &[
    Device {
        id: "tpu-v5e",
        name: "TPU v5e",
        short_name: "TPU v5e",
        kinds: &["v5 lite", "v5e", "v5litepod"],
        platform: Platform::Tpu,
        bf16_tflops: Some(197.0),
        hbm_gib: Some(16.0),
        hbm_gbps: Some(819.0),
        compute: "1 TensorCore per chip with four 128x128 matrix units (MXU), a vector unit and a scalar unit",
        on_chip: "128 MiB of VMEM (vector memory) per core; the default scoped VMEM limit of a kernel is 16 MiB",
        notes: TPU_NOTES,
    },
    Device {
        id: "tpu-v6e",
        name: "TPU v6e (Trillium)",
        short_name: "TPU v6e",
        kinds: &["v6 lite", "v6e", "trillium", "v6"],
        platform: Platform::Tpu,
        bf16_tflops: Some(918.0),
        hbm_gib: Some(32.0),
        hbm_gbps: Some(1640.0),
        compute: "1 TensorCore per chip with 256x256 matrix units (MXU), a vector unit and a scalar unit",
        on_chip: "128 MiB of VMEM (vector memory) per core; the default scoped VMEM limit of a kernel is 32 MiB",
        notes: TPU_NOTES,
    },
    Device {
        id: "tpu-v5p",
        name: "TPU v5p",
        short_name: "TPU v5p",
        kinds: &["v5p", "v5"],
        platform: Platform::Tpu,
        bf16_tflops: Some(459.0),
        hbm_gib: Some(95.0),
        hbm_gbps: Some(2765.0),
        compute: "2 TensorCores per chip (megacore: `parallel` grid axes are split between them), each with four 128x128 matrix units",
        on_chip: "VMEM (vector memory) per core; the default scoped VMEM limit of a kernel is 16 MiB",
        notes: TPU_NOTES,
    },
    Device {
        id: "tpu",
        name: "TPU (generation unknown)",
        short_name: "TPU",
        kinds: &[],
        platform: Platform::Tpu,
        bf16_tflops: None,
        hbm_gib: None,
        hbm_gbps: None,
        compute: "TensorCores with systolic matrix units (MXU), a vector unit and a scalar unit",
        on_chip: "VMEM (vector memory) per core, tens of MiB",
        notes: TPU_NOTES,
    },
    Device {
        id: "h100",
        name: "NVIDIA H100 SXM",
        short_name: "NVIDIA H100",
        kinds: &["h100"],
        platform: Platform::Gpu,
        bf16_tflops: Some(989.0),
        hbm_gib: Some(80.0),
        hbm_gbps: Some(3350.0),
        compute: "132 streaming multiprocessors with 4th-generation tensor cores",
        on_chip: "up to 228 KiB of shared memory per SM, 50 MiB of L2 cache",
        notes: GPU_NOTES,
    },
    Device {
        id: "h200",
        name: "NVIDIA H200 SXM",
        short_name: "NVIDIA H200",
        kinds: &["h200"],
        platform: Platform::Gpu,
        bf16_tflops: Some(989.0),
        hbm_gib: Some(141.0),
        hbm_gbps: Some(4800.0),
        compute: "132 streaming multiprocessors with 4th-generation tensor cores",
        on_chip: "up to 228 KiB of shared memory per SM, 50 MiB of L2 cache",
        notes: GPU_NOTES,
    },
    Device {
        id: "gpu",
        name: "GPU (model unknown)",
        short_name: "GPU",
        kinds: &[],
        platform: Platform::Gpu,
        bf16_tflops: None,
        hbm_gib: None,
        hbm_gbps: None,
        compute: "streaming multiprocessors with tensor cores",
        on_chip: "shared memory per SM and an L2 cache",
        notes: GPU_NOTES,
    },
    Device {
        id: "cpu",
        name: "CPU (Pallas interpret mode)",
        short_name: "CPU",
        kinds: &[],
        platform: Platform::Cpu,
        bf16_tflops: None,
        hbm_gib: None,
        hbm_gbps: None,
        compute: "host CPU cores running the Pallas interpreter",
        on_chip: "no VMEM or shared memory: blocks are host arrays",
        notes: CPU_NOTES,
    },
];

/// The device with this `--target` name.
pub fn by_id(id: &str) -> Option<&'static Device> {
    DEVICES.iter().find(|d| d.id.eq_ignore_ascii_case(id))
}

pub fn ids() -> Vec<&'static str> {
    DEVICES.iter().map(|d| d.id).collect()
}

/// The device a JAX `device_kind` names (`TPU v6 lite`, `NVIDIA H100 80GB HBM3`, `cpu`), given
/// the backend (`cpu`, `gpu`, `tpu`).
pub fn from_device_kind(kind: &str, backend: &str) -> &'static Device {
    if let Some(d) = known_kind(kind) {
        return d;
    }
    let id = match backend {
        "tpu" => "tpu",
        "gpu" => "gpu",
        _ if kind.to_lowercase().contains("tpu") => "tpu",
        _ => "cpu",
    };
    by_id(id).expect("every id is in the table")
}

/// The specific (non-generic) device a JAX `device_kind` names, if the table knows it.
pub fn known_kind(kind: &str) -> Option<&'static Device> {
    let k = kind.to_lowercase();
    DEVICES
        .iter()
        .find(|d| d.kinds.iter().any(|p| k.contains(p)))
}

/// The target of a session: `--target` if given, else what the fingerprint says.
pub fn from_fingerprint(fp: &BTreeMap<String, String>, backend: &str) -> &'static Device {
    from_device_kind(
        fp.get("device_kind").map(String::as_str).unwrap_or(""),
        backend,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_kinds_map_to_the_table() {
        assert_eq!(from_device_kind("TPU v6 lite", "tpu").id, "tpu-v6e");
        assert_eq!(from_device_kind("TPU v5 lite", "tpu").id, "tpu-v5e");
        assert_eq!(from_device_kind("TPU v5", "tpu").id, "tpu-v5p");
        assert_eq!(from_device_kind("TPU v4", "tpu").id, "tpu");
        assert_eq!(from_device_kind("NVIDIA H100 80GB HBM3", "gpu").id, "h100");
        assert_eq!(from_device_kind("NVIDIA H200", "gpu").id, "h200");
        assert_eq!(from_device_kind("NVIDIA A100-SXM4-40GB", "gpu").id, "gpu");
        assert_eq!(from_device_kind("cpu", "cpu").id, "cpu");
        assert_eq!(by_id("TPU-V6E").unwrap().id, "tpu-v6e");
    }

    #[test]
    fn ridge_points() {
        let v6e = by_id("tpu-v6e").unwrap().ridge_point().unwrap();
        assert!((v6e - 559.8).abs() < 1.0, "{v6e}");
        assert!(by_id("cpu").unwrap().ridge_point().is_none());
    }
}
