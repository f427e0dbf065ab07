"""The worker ops called in-process (tiny scale), interpret forcing, jaxpr analyses."""

from __future__ import annotations

import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

from jb import interpret
from jb.ops import common
from jb.ops import compile as compile_op
from jb.ops import describe, fingerprint, peak, profile, verify

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
TWO_TRIALS = [{"seed": 1, "dist": "normal"}, {"seed": 2, "dist": "uniform"}]


def wl(name: str) -> str:
    path = ROOT / "workloads" / name
    if not (path / "workload.py").is_file():
        pytest.skip(f"workload {name} not present")
    return str(path)


def cand(*parts: str) -> dict:
    return {"kind": "candidate", "path": str(ROOT.joinpath(*parts))}


def test_fingerprint():
    r = fingerprint.run({})
    for key in ("python", "jax", "jaxlib", "tokamax", "numpy", "backend", "device_kind", "device_count", "xla_flags"):
        assert key in r
    assert r["backend"] == jax.default_backend()


def test_peak_small():
    r = peak.run({"matmul_n": 256, "bandwidth_mib": 16})
    # How fast this machine is right now is not asserted; what the peak is made of is.
    # The peak is the faster dtype, whichever that is on this machine (on a busy CPU either can win).
    assert r["flops_per_s"] == max(r["matmul_flops_per_s"].values()) and r["bandwidth_bytes"] == 16 * 2**20
    assert all(math.isfinite(v) and v > 0 for v in (r["flops_per_s"], r["bytes_per_s"]))
    assert set(r["matmul_flops_per_s"]) == {"bf16_f32acc", "f32"}


def test_describe_12p():
    r = describe.run({"workload": wl("12p_RMSNorm"), "scale": "tiny"})
    assert r["name"] == "12p_RMSNorm" and r["scale"] == "tiny"
    x_shape = r["inputs"][0]["shape"]
    assert r["outputs"] == [{"shape": x_shape, "dtype": "bfloat16"}]
    assert r["flops"] == 5 * x_shape[0] * x_shape[1] * x_shape[2] and r["flops_source"] == "get_flops"
    assert r["tolerance"] == {"atol": 0.01, "rtol": 0.01}


def test_describe_static_pytree_fixture():
    r = describe.run({"workload": str(FIXTURES / "workloads" / "static_pytree"), "scale": "tiny"})
    assert r["inputs"][1] == {"value": 2, "type": "int"}
    assert r["static_argnums"] == [1]
    assert len(r["outputs"]) == 2 and r["flops_source"] == "xla_cost_analysis"


def test_compile_xla_and_candidate_8p():
    xla = compile_op.run({"workload": wl("8p_GEMM"), "scale": "tiny", "impl": {"kind": "xla"}})
    assert xla["status"] == "ok" and xla["has_pallas_call"] is False and xla["interpret"] is False
    cfg = describe.run({"workload": wl("8p_GEMM"), "scale": "tiny"})["config"]
    assert xla["cost"]["flops"] == pytest.approx(2 * cfg["M"] * cfg["K"] * cfg["N"], rel=0.01)
    assert xla["memory"]["argument_bytes"] > 0 and math.isfinite(xla["compile_ms"])
    r = compile_op.run({"workload": wl("8p_GEMM"), "scale": "tiny", "impl": cand("candidates", "8p_GEMM", "gemm_pallas.py")})
    assert r["status"] == "ok", r
    assert r["has_pallas_call"] is True and r["interpret"] is True and r["interpret_mode"] == "generic"
    assert r["matmul_flops"]["inside_pallas"] == 2 * cfg["M"] * cfg["K"] * cfg["N"]
    assert r["matmul_flops"]["share_outside"] == 0.0
    assert math.isfinite(r["first_run_ms"])


def test_compile_baseline_valid_and_invalid():
    base = {"kind": "baseline", "path": str(ROOT / "tokamax_baselines" / "8p_GEMM" / "baseline.py")}
    if not pathlib.Path(base["path"]).is_file():
        pytest.skip("8p baseline not present")
    cfg = describe.run({"workload": wl("8p_GEMM"), "scale": "tiny"})["config"]
    bad = compile_op.run({"workload": wl("8p_GEMM"), "scale": "tiny", "impl": dict(base, config={"bm": 7, "bn": cfg["N"], "bk": cfg["K"]})})
    assert bad["status"] == "invalid" and bad["error"]
    good = compile_op.run({"workload": wl("8p_GEMM"), "scale": "tiny", "impl": dict(base, config={"bm": cfg["M"], "bn": cfg["N"], "bk": cfg["K"]})})
    assert good["status"] == "ok", good
    assert good["has_pallas_call"] and good["impl"]["kind"] == "baseline"


def test_compile_auto_interpret_retries_in_tpu_mode():
    r = compile_op.run({"workload": wl("12p_RMSNorm"), "scale": "tiny", "impl": {"kind": "candidate", "path": str(FIXTURES / "candidates" / "prng_rmsnorm.py")}})
    assert r["status"] == "ok", r
    assert r["interpret_mode"] == "tpu"
    forced = compile_op.run({"workload": wl("12p_RMSNorm"), "scale": "tiny", "interpret_mode": "generic", "run": False,
                             "impl": {"kind": "candidate", "path": str(FIXTURES / "candidates" / "prng_rmsnorm.py")}})
    assert forced["status"] == "compile_error"


def test_verify_correct_candidate_default_trials():
    r = verify.run({"workload": wl("8p_GEMM"), "scale": "tiny", "impl": cand("candidates", "8p_GEMM", "gemm_pallas.py")})
    assert r["status"] == "correct", r
    # One trial per class of the workload's plan, seeds drawn in secret and revealed in the result.
    plain = [t for t in r["trials"] if "variant" not in t]
    assert [t["dist"] for t in plain] == verify._plan(verify.load_workload(wl("8p_GEMM"), "tiny"))
    assert [t["seed"] for t in r["trials"]] == r["seeds"] and r["seed_source"] == "os_random"
    assert all(t["ok"] for t in r["trials"]) and all(t["deterministic"] for t in plain)
    assert r["max_abs_err"] is not None and r["reasons"] == [] and "tainted" not in r


def test_verify_static_pytree_fixture_candidate_and_pure_jax():
    w = str(FIXTURES / "workloads" / "static_pytree")
    r = verify.run({"workload": w, "scale": "tiny", "trials": TWO_TRIALS,
                    "impl": {"kind": "candidate", "path": str(FIXTURES / "candidates" / "static_pytree_pallas.py")}})
    assert r["status"] == "correct", r
    ref_as_candidate = {"kind": "candidate", "path": str(pathlib.Path(w) / "workload.py")}
    assert verify.run({"workload": w, "scale": "tiny", "trials": TWO_TRIALS, "impl": ref_as_candidate})["status"] == "rejected"
    allowed = verify.run({"workload": w, "scale": "tiny", "trials": TWO_TRIALS, "impl": ref_as_candidate, "allow_pure_jax": True})
    assert allowed["status"] == "correct" and allowed["max_abs_err"] == 0.0


def test_verify_rejects_unknown_distribution():
    with pytest.raises(ValueError):
        verify.run({"workload": wl("12p_RMSNorm"), "scale": "tiny", "trials": [{"seed": 1, "dist": "cauchy"}]})


def test_profile_candidate_12p(tmp_path):
    r = profile.run({"workload": wl("12p_RMSNorm"), "scale": "tiny", "impl": cand("candidates", "12p_RMSNorm", "rmsnorm_pallas.py"),
                     "warmup": 2, "iters": 6, "input_sets": 3, "out_dir": str(tmp_path)})
    assert r["status"] == "ok", r
    assert r["timing_source"] == "host_clock", r["timing"]["notes"]
    assert r["samples_ms"] == r["wall_samples_ms"]
    # The trace file comes from a short session after the timed iterations (2 runs), parsed.
    # (What is asserted is what was derived from what, never how long anything took.)
    timing = r["timing"]
    assert "impl" in timing["traced_ms"] and "impl" in timing["traced_wall_ms"], timing
    assert timing["trace_wall_ratio"] == timing["traced_ms"]["impl"] / timing["traced_wall_ms"]["impl"]
    assert len(r["samples_ms"]) == 6 and len(r["wall_samples_ms"]) == 6
    assert r["median_ms"] == float(np.median(r["samples_ms"])) and r["min_ms"] == min(r["samples_ms"])
    assert r["wall_median_ms"] == float(np.median(r["wall_samples_ms"]))
    assert r["flops_source"] == "get_flops" and r["flops"] > 0 and "tflops" not in r and r["interpret"] is True
    assert (tmp_path / r["trace"]).is_file() and r["trace"].startswith("trace/")


def test_profile_trace_clock_on_cpu_times_from_the_thunk_events(tmp_path):
    # The trace clock (TPU/GPU's default) still works on CPU when asked for: every timed iteration
    # in one trace session, the per-iteration time from XLA:CPU's thunk events.
    r = profile.run({"workload": wl("12p_RMSNorm"), "scale": "tiny", "impl": cand("candidates", "12p_RMSNorm", "rmsnorm_pallas.py"),
                     "warmup": 2, "iters": 6, "clock": "trace", "out_dir": str(tmp_path)})
    assert r["status"] == "ok", r
    assert r["timing_source"] == "trace:cpu_thunks", r["timing"]["notes"]
    assert len(r["samples_ms"]) == 6 and r["samples_ms"] != r["wall_samples_ms"]
    assert (tmp_path / r["trace"]).is_file()
    # The timed runs ran without garbage collection; the judge gets it back.
    import gc
    assert gc.isenabled()
    with pytest.raises(ValueError, match="clock"):
        profile.run({"workload": wl("12p_RMSNorm"), "scale": "tiny", "impl": {"kind": "xla"}, "clock": "tsc"})


def test_profile_xla_flops_from_cost_analysis_and_roofline_flag(tmp_path):
    w = str(FIXTURES / "workloads" / "static_pytree")
    r = profile.run({"workload": w, "scale": "tiny", "impl": {"kind": "xla"}, "warmup": 1, "iters": 3,
                     "peak": {"flops_per_s": 1.0, "bytes_per_s": 1.0}})
    assert r["status"] == "ok" and r["flops_source"] == "xla_cost_analysis" and r["flops"] > 0
    assert r["trace"] is None  # no out_dir
    assert r["suspicious"] is True and r["reasons"]


def _kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def test_generic_interpret_forcing_plain_pallas_call():
    interpret.enable(jax.default_backend())
    f = jax.jit(lambda x: pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x))
    out = f(jnp.ones((8, 128)))
    assert float(out.sum()) == 2 * 8 * 128


def test_jaxpr_report_nested_pallas_consts_and_flops():
    big = jnp.ones((64, 64))

    def inner(x):
        y = pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
        return jnp.dot(y, big)

    def outer(x):
        def body(c, _):
            return jax.jit(inner)(c), None

        c, _ = jax.lax.scan(body, x, None, length=3)
        return jax.lax.cond(c.sum() > 0, lambda: c, lambda: -c)

    closed = jax.jit(outer).trace(jnp.ones((64, 64))).jaxpr
    rep = common.jaxpr_report(closed)
    assert rep["has_pallas_call"]
    assert rep["matmul_flops"]["outside_pallas"] == 3 * 2 * 64 * 64 * 64
    assert any(c["size"] == 64 * 64 for c in rep["constants"])
    notes, rejects = common.constant_reasons(rep, (jnp.ones((64, 64)),), min_size=1024)
    assert rejects and not notes
    assert common.jaxpr_report(jax.jit(lambda x: x + 1).trace(jnp.ones(3)).jaxpr)["has_pallas_call"] is False
