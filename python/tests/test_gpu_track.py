"""The Mosaic GPU track (issue 26 item 2) checked on this CPU host: the GPU hand-tuned baselines
are the installed libraries' kernels (jb.impl.baseline_track picks an adapter's ``gpu_*`` track on
the ``gpu`` backend), run in Mosaic GPU's interpreter (jb.interpret.gpu_preflight) against the
XLA reference, and exported for 'cuda' at paper scale from CPU, where the judge's artifact checks
find the kernel (``mosaic_gpu_v2``). Adapters without a GPU kernel say ``unsupported`` with why."""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jb import exported, guard, impl, interpret as interp
from jb.ops import export
from jb.workload import load_module, load_workload

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASELINES = sorted(ROOT.glob("tokamax_baselines/*/baseline.py"))
GPU_TRACK = {"8p_GEMM"}

pytestmark = pytest.mark.skipif(jax.default_backend() != "cpu", reason="the CPU pre-flight of the GPU track")


def adapter(name: str):
    return load_module(ROOT / "tokamax_baselines" / name / "baseline.py", f"jb_baseline_{name}")


def test_the_gpu_backend_gets_the_gpu_track_or_a_reason():
    for path in BASELINES:
        name = path.parent.name
        track = impl.baseline_track(adapter(name), "gpu")
        if name in GPU_TRACK:
            assert callable(track["make"]) and track["defaults"], name
        else:
            why = track["unsupported"]("gpu")
            assert track["make"] is None and why and "GPU" in why, (name, why)
    # The TPU/CPU track is untouched.
    assert impl.baseline_track(adapter("8p_GEMM"), "tpu")["defaults"] == adapter("8p_GEMM").DEFAULTS


def test_8p_mosaic_gpu_matmul_runs_in_the_gpu_interpreter():
    mod = adapter("8p_GEMM")
    cfg = {"M": 256, "K": 256, "N": 512}
    assert mod.gpu_invalid({}, cfg) is None
    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.standard_normal((256, 256)), jnp.bfloat16)
    b = jnp.asarray(rng.standard_normal((256, 512)), jnp.bfloat16)
    out = interp.gpu_preflight(mod.gpu_make({}, cfg, True), a, b, num_sms=2)
    ref = np.asarray(a, np.float32) @ np.asarray(b, np.float32)
    assert out.shape == (256, 512) and out.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(out, np.float32), ref, atol=0.5, rtol=2e-2)
    # A wrong tile choice is refused before the kernel is built.
    assert "CTA tile" in mod.gpu_invalid({"tile_n": 512}, cfg)


def test_8p_gpu_kernel_exports_for_cuda_at_paper_scale_and_is_judged(tmp_path):
    workload = ROOT / "workloads" / "8p_GEMM"
    snapshot = guard.baseline()
    try:
        result = export.run({"workload": str(workload), "scale": "paper", "backend": "gpu", "device_kind": "NVIDIA H200",
                             "out_dir": str(tmp_path), "impl": {"kind": "baseline", "path": str(ROOT / "tokamax_baselines/8p_GEMM/baseline.py")}})
    finally:
        guard.restore(snapshot)
    assert result["status"] == "ok", result
    assert (result["platform"], result["device_kind"], result["interpret_mode"]) == ("cuda", "NVIDIA H200", None)
    assert result["programs"][0]["in_avals"] == [[[8192, 8192], "bfloat16"], [[8192, 28672], "bfloat16"]]
    _, facts = exported.load(tmp_path / "export", load_workload(workload, "paper"), "cuda")
    assert facts["pallas_evidence"] == "artifact" and "mosaic_gpu_v2" in facts["custom_calls"], facts


def test_gpu_baseline_is_unsupported_not_a_crash_where_there_is_no_kernel():
    wl = load_workload(ROOT / "workloads" / "6p_Paged_Attention", "tiny")
    got = impl.resolve({"kind": "baseline", "path": str(ROOT / "tokamax_baselines/6p_Paged_Attention/baseline.py")}, wl, "gpu", False)
    assert got.status == "unsupported" and "GPU" in got.error
