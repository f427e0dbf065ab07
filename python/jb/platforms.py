"""Platform facts shared by the export stage, the judge's artifact checks and the device check.

One place for what a jb backend (``cpu``, ``gpu``, ``tpu``) means to JAX:

* the ``jax.export`` platform of a backend (``gpu`` -> ``cuda``; ROCm only when asked);
* the device kinds as ``jax.devices()[0].device_kind`` spells them on each chip jb knows (the same
  chips as jb's Rust device table, ``src/device/mod.rs``), with the core count an abstract device
  of that kind needs (TPU TensorCores per chip; GPU streaming multiprocessors: Mosaic GPU kernels
  size their persistent grids from it);
* the Pallas evidence each platform's artifacts carry (``tpu_custom_call``: Mosaic TPU;
  ``mosaic_gpu_v2``: Mosaic GPU; Triton only explicitly, see :data:`TRITON_TARGETS`);
* the TPU topology variables a sandboxed step that must open a TPU needs (libtpu otherwise asks
  the metadata server, which the sandbox cannot reach).

Exporting for a target from CPU (issue 23 item 2): the export stage runs with
``JAX_PLATFORMS=cpu`` and calls ``jax.export.export(..., platforms=[target])`` inside
:func:`target_context`, an abstract mesh of one device of the fingerprint's kind
(``jax.sharding.use_abstract_mesh(AbstractMesh(..., abstract_device=AbstractDevice(...)))``), so
kernels that ask "which chip is this" (Pallas TPU's tiling rules, ``get_num_sms`` of the Mosaic GPU
matmul) get the target's answer without the accelerator ever being opened.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os

BACKENDS = ("cpu", "gpu", "tpu")


@dataclasses.dataclass(frozen=True)
class Kind:
    """One chip as JAX names it."""

    device_kind: str  # exactly as jax.devices()[0].device_kind says it
    backend: str  # jb backend: tpu | gpu
    platform: str  # jax.export platform: tpu | cuda
    num_cores: int  # TensorCores per chip (TPU) or SMs (GPU)
    device_id: str  # the row of jb's Rust device table (src/device/mod.rs)


# Spellings read from JAX's own tables and the vendors' device names (libtpu's ChipVersion names,
# NVML product names): TPU v5e reports "TPU v5 lite", v6e "TPU v6 lite", v5p "TPU v5".
KINDS: tuple[Kind, ...] = (
    Kind("TPU v5 lite", "tpu", "tpu", 1, "tpu-v5e"),
    Kind("TPU v6 lite", "tpu", "tpu", 1, "tpu-v6e"),
    Kind("TPU v5", "tpu", "tpu", 2, "tpu-v5p"),
    Kind("TPU v4", "tpu", "tpu", 2, "tpu"),
    Kind("NVIDIA H100 80GB HBM3", "gpu", "cuda", 132, "h100"),
    Kind("NVIDIA H100 PCIe", "gpu", "cuda", 114, "h100"),
    Kind("NVIDIA H200", "gpu", "cuda", 132, "h200"),
)
# The kind an export targets when the fingerprint does not say (a dry run, a test).
DEFAULT_KIND = {"tpu": "TPU v6 lite", "gpu": "NVIDIA H100 80GB HBM3"}

PALLAS_TARGETS = {
    "tpu": ("tpu_custom_call",),
    "cuda": ("mosaic_gpu_v2", "mosaic_gpu"),
    "rocm": (),
    "cpu": (),
}
# Triton kernels (Pallas's deprecated GPU backend, tokamax's triton implementations) lower to these
# targets. They are not in jax's list of targets with a compatibility guarantee: an artifact made
# by one jax/jaxlib may not compile on another, so exporter and judge versions must match.
TRITON_TARGETS = ("__gpu$xla.gpu.triton", "triton_kernel_call_ffi")

# TPU topology: read by jb outside the sandbox and passed in (a sandboxed step with no network
# otherwise waits on the GCE metadata server for its topology).
TPU_TOPOLOGY_VARS = (
    "TPU_SKIP_MDS_QUERY", "TPU_ACCELERATOR_TYPE", "TPU_CHIPS_PER_HOST_BOUNDS", "TPU_HOST_BOUNDS",
    "TPU_WORKER_ID", "TPU_WORKER_HOSTNAMES", "TPU_TOPOLOGY", "TPU_TOPOLOGY_WRAP", "TPU_RUNTIME_METRICS_PORTS",
)


def export_platform(backend: str) -> str:
    """The ``jax.export`` platform of a jb backend (``gpu`` -> ``cuda``)."""
    if backend in ("cpu", "tpu", "cuda", "rocm"):
        return backend
    if backend == "gpu":
        return "rocm" if os.environ.get("JB_GPU_PLATFORM") == "rocm" else "cuda"
    raise ValueError(f"unknown backend {backend!r}; expected one of {BACKENDS}")


def backend_of(platform: str) -> str:
    return "gpu" if platform in ("cuda", "rocm", "gpu") else platform


def kind(device_kind: str | None, backend: str) -> Kind:
    """The :class:`Kind` of ``device_kind`` on ``backend`` (an exact spelling first, then a known
    prefix, else the backend's default kind with that name: an unknown chip keeps its own name)."""
    backend = backend_of(backend)
    if backend not in DEFAULT_KIND:
        raise ValueError(f"no accelerator kinds for backend {backend!r}")
    name = device_kind or DEFAULT_KIND[backend]
    for k in KINDS:
        if k.device_kind == name and k.backend == backend:
            return k
    for k in sorted(KINDS, key=lambda k: -len(k.device_kind)):
        if name.startswith(k.device_kind) and k.backend == backend:
            return dataclasses.replace(k, device_kind=name)
    base = next(k for k in KINDS if k.device_kind == DEFAULT_KIND[backend])
    if backend == "tpu" and not name.startswith("TPU"):
        raise ValueError(f"{name!r} is not a TPU device kind (JAX spells them like {base.device_kind!r})")
    return dataclasses.replace(base, device_kind=name, device_id=backend)


def abstract_mesh(k: Kind):
    from jax.sharding import AbstractDevice, AbstractMesh

    device = AbstractDevice(device_kind=k.device_kind, num_cores=k.num_cores, platform=k.platform)
    return AbstractMesh((1,), ("jb",), abstract_device=device)


def target_context(target: str, device_kind: str | None = None):
    """The context an export for ``target`` (a jb backend) runs in on a CPU-only process: an
    abstract mesh of one device of ``device_kind``; nothing for ``cpu``."""
    if backend_of(target) == "cpu":
        return contextlib.nullcontext()
    from jax.sharding import use_abstract_mesh

    return use_abstract_mesh(abstract_mesh(kind(device_kind, target)))


def tpu_topology_env(environ=None) -> dict[str, str]:
    """The TPU topology variables set here, with ``TPU_SKIP_MDS_QUERY=1`` added when any is."""
    environ = os.environ if environ is None else environ
    env = {k: environ[k] for k in TPU_TOPOLOGY_VARS if k in environ}
    if env:
        env.setdefault("TPU_SKIP_MDS_QUERY", "1")
    return env
