"""The 8 hand-tuned baselines (tokamax_baselines/<workload>/{baseline.py, space.yaml}).

- space.yaml agrees with baseline.py (kernel, defaults) and the paper spaces give the paper's counts;
- every config of every scale's space is valid for that scale's shape (and DEFAULTS at paper scale);
- at tiny scale the first config of the tiny space (DEFAULTS clamped to the shape) reproduces the
  workload's XLA output within the workload's tolerance (Pallas interpret mode on CPU);
- ``unsupported`` gives its reason on CPU exactly where the kernel cannot run there;
- at paper scale, DEFAULTS and the first and last config of the paper space lower for TPU (Pallas
  Mosaic lowering runs on a CPU host: it checks block shapes against the TPU tiling rules, though
  not VMEM capacity or Mosaic's later passes, which need the TPU compiler);
- ``invalid`` names a config that does not divide the tiny shape.
"""

from __future__ import annotations

import contextlib
import itertools
import pathlib
import re

import jax
import pytest
import yaml

from jb.compare import compare
from jb.workload import load_module, load_workload

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASELINES = ROOT / "tokamax_baselines"

# Published grid-search sizes (JAXBench paper): 203 configurations in all.
PAPER_COUNTS = {
    "1p_Flash_Attention": 44,
    "2p_GQA_Attention": 24,
    "3p_MLA_Attention": 24,
    "4p_Sparse_Attention": 44,
    "6p_Paged_Attention": 4,
    "7p_Ragged_Paged_Attention": 9,
    "8p_GEMM": 27,
    "11p_Megablox_GMM": 27,
}
NAMES = sorted(PAPER_COUNTS, key=lambda n: int(n.split("p_")[0]))
# Kernels that cannot run off TPU, with a fragment of the reason.
UNSUPPORTED_ON_CPU = {"7p_Ragged_Paged_Attention": "TypedInt"}
SUPPORTED_ON_CPU = [n for n in NAMES if n not in UNSUPPORTED_ON_CPU]

# A config that does not fit the tiny shape, per baseline: a block that does not divide its
# dimension, except for 7p, whose kernel accepts ragged blocks (there: a block larger than it).
NON_DIVIDING = {
    "1p_Flash_Attention": {"block_q": 48, "block_k_major": 64, "block_k": 64},  # seq_len 64
    "2p_GQA_Attention": {"block_q": 96, "block_kv": 128, "block_kv_compute": 128},  # seq 32 -> 128
    "3p_MLA_Attention": {"block_q": 64, "block_k_major": 64, "block_k": 48},  # seq_len 64
    "4p_Sparse_Attention": {"block_q": 128, "block_kv": 96, "block_kv_compute": 96},  # seq 64 -> 128
    "6p_Paged_Attention": {"pages_per_compute_block": 3},  # pages_per_seq 8
    "7p_Ragged_Paged_Attention": {"num_kv_pages_per_block": 16, "num_queries_per_block": 16},  # 8 pages/seq
    "8p_GEMM": {"bm": 48, "bn": 448, "bk": 128},  # M 64
    "11p_Megablox_GMM": {"tm": 48, "tk": 128, "tn": 64},  # M 128
}


def baseline(name: str):
    return load_module(BASELINES / name / "baseline.py", "jb_baseline")


def space_spec(name: str) -> dict:
    return yaml.safe_load((BASELINES / name / "space.yaml").read_text())


def filter_ok(expr: str | None, config: dict) -> bool:
    """Evaluate an evalexpr filter (C-like &&, ||, !) over integer parameters with Python."""
    if not expr:
        return True
    py = expr.replace("&&", " and ").replace("||", " or ")
    py = re.sub(r"!(?!=)", " not ", py)
    py = re.sub(r"(?<!/)/(?!/)", "//", py)  # evalexpr divides integers as integers
    return bool(eval(py, {"__builtins__": {}}, dict(config)))  # noqa: S307 - test-only, our own files


def enumerate_space(name: str, scale: str) -> list[dict]:
    scale_spec = space_spec(name)["space"][scale]
    params = scale_spec["params"]
    keys = list(params)
    configs = [dict(zip(keys, values)) for values in itertools.product(*(params[k] for k in keys))]
    return [c for c in configs if filter_ok(scale_spec.get("filter"), c)]


def workload_dir(name: str) -> pathlib.Path:
    return ROOT / "workloads" / name


def test_filter_evaluator():
    assert filter_ok("a >= b && !(a == 3)", {"a": 4, "b": 2})
    assert not filter_ok("a >= b && !(a == 3)", {"a": 3, "b": 2})
    assert filter_ok("a != b || a * 2 <= 1", {"a": 1, "b": 1}) is False
    assert filter_ok("a / 2 == 1", {"a": 3})


@pytest.mark.parametrize("name", NAMES)
def test_space_matches_baseline(name):
    bl, spec = baseline(name), space_spec(name)
    assert bl.WORKLOAD == name
    assert spec["kernel"] == bl.KERNEL
    assert spec["defaults"] == bl.DEFAULTS
    for scale in ("paper", "cpu", "tiny"):
        assert set(spec["space"][scale]["params"]) == set(bl.DEFAULTS), f"{name} {scale}: parameter names"
        assert all(isinstance(v, int) for vals in spec["space"][scale]["params"].values() for v in vals)


def test_paper_space_counts():
    counts = {name: len(enumerate_space(name, "paper")) for name in NAMES}
    assert counts == PAPER_COUNTS
    assert sum(counts.values()) == 203


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("scale", ["paper", "cpu", "tiny"])
def test_space_configs_valid(name, scale):
    bl = baseline(name)
    wl = load_workload(workload_dir(name), scale)
    configs = enumerate_space(name, scale)
    assert configs, f"{name} {scale}: empty space"
    assert len({tuple(sorted(c.items())) for c in configs}) == len(configs)
    if scale == "paper":
        assert bl.invalid(bl.DEFAULTS, wl.config) is None
    elif scale == "cpu":
        assert len(configs) <= 9
    else:
        assert len(configs) <= 4
    for config in configs:
        assert bl.invalid(config, wl.config) is None, f"{name} {scale} {config}: {bl.invalid(config, wl.config)}"


@pytest.mark.parametrize("name", NAMES)
def test_invalid_flags_non_dividing_config(name):
    bl = baseline(name)
    wl = load_workload(workload_dir(name), "tiny")
    reason = bl.invalid(NON_DIVIDING[name], wl.config)
    expected = "must be in" if name == "7p_Ragged_Paged_Attention" else "does not divide"
    assert isinstance(reason, str) and expected in reason, reason


@pytest.mark.parametrize("name", NAMES)
def test_unsupported(name):
    bl = baseline(name)
    assert bl.unsupported("tpu") is None
    reason = bl.unsupported("cpu")
    if name in UNSUPPORTED_ON_CPU:
        assert isinstance(reason, str) and UNSUPPORTED_ON_CPU[name] in reason
    else:
        assert reason is None


@pytest.mark.parametrize("name", SUPPORTED_ON_CPU)
def test_tiny_first_config_matches_workload(name):
    bl = baseline(name)
    wl = load_workload(workload_dir(name), "tiny")
    config = enumerate_space(name, "tiny")[0]
    inputs = wl.create_inputs()
    reference = jax.block_until_ready(wl.jitted()(*inputs))
    # paged attention (6p) passes with the workload's own tolerance: the kernel's K/V cast to bf16
    # is a no-op for the bf16 inputs, and its f32 probabilities differ from the reference's bf16
    # ones by far less than atol.
    out = jax.block_until_ready(wl.jitted(bl.make(config, wl.config, True))(*inputs))
    result = compare(reference, out, **wl.tolerance)
    jax.clear_caches()
    assert result.ok, f"{name} {config}: {result.reason}"


def test_7p_interpret_mode_still_fails():
    """The reason 7p gives for CPU holds: its kernel raises in interpret mode (jax 0.10.2)."""
    name = "7p_Ragged_Paged_Attention"
    bl = baseline(name)
    wl = load_workload(workload_dir(name), "tiny")
    config = enumerate_space(name, "tiny")[0]
    with pytest.raises(Exception, match="TypedInt"):
        jax.block_until_ready(wl.jitted(bl.make(config, wl.config, True))(*wl.create_inputs()))
    jax.clear_caches()


def test_7p_inputs_follow_the_kernel_conventions():
    """The 7p adapter passes the workload's inputs through with sm_scale = D**-0.5: the kernel's
    own pure-JAX reference, called that way, reproduces the workload (K/V interleaving, offsets)."""
    from jax.experimental.pallas.ops.tpu.ragged_paged_attention import ref_ragged_paged_attention

    import numpy as np

    wl = load_workload(workload_dir("7p_Ragged_Paged_Attention"), "tiny")
    inputs = wl.create_inputs()
    reference = wl.jitted()(*inputs)
    # The reference loops over sequences in Python: close over the integer inputs as numpy
    # constants so that one jit covers it (eagerly it takes ~30 s of per-op compiles).
    ints = tuple(np.asarray(x) for x in inputs[2:])
    ref = jax.jit(lambda q, kv: ref_ragged_paged_attention(q, kv, *ints, sm_scale=q.shape[-1] ** -0.5))
    result = compare(reference, ref(*inputs[:2]), **wl.tolerance)
    jax.clear_caches()
    assert result.ok, result.reason


@contextlib.contextmanager
def _v6e_info_for_cpu():
    """Some kernels (7p) read pltpu.get_tpu_info() while lowering: answer for the CPU device with
    TPU v6e's figures for the duration, then forget it again."""
    from jax._src.pallas.mosaic import tpu_info

    had = "cpu" in tpu_info.registry
    tpu_info.registry.setdefault("cpu", lambda: tpu_info.get_tpu_info_for_chip(tpu_info.ChipVersion.TPU_V6E, 1))
    try:
        yield
    finally:
        if not had:
            tpu_info.registry.pop("cpu", None)
        tpu_info.get_tpu_info.cache_clear()


def _abstract_inputs(wl):
    """Shapes of the workload's inputs without materialising them; static (Python) inputs kept."""
    statics = {}

    def arrays_only():
        out = wl.create_inputs()
        for i in wl.static_argnums:
            statics[i] = out[i]
        return tuple(x for i, x in enumerate(out) if i not in wl.static_argnums)

    arrays = jax.eval_shape(arrays_only)
    rest = iter(arrays)
    return tuple(statics[i] if i in statics else next(rest) for i in range(len(arrays) + len(statics)))


@pytest.mark.parametrize("name", NAMES)
def test_paper_configs_lower_for_tpu(name):
    bl = baseline(name)
    wl = load_workload(workload_dir(name), "paper")
    inputs = _abstract_inputs(wl)
    space = enumerate_space(name, "paper")
    with _v6e_info_for_cpu():
        for config in (bl.DEFAULTS, space[0], space[-1]):
            fn = jax.jit(bl.make(config, wl.config, False), static_argnums=wl.static_argnums)
            text = fn.trace(*inputs).lower(lowering_platforms=("tpu",)).as_text()
            assert "tpu_custom_call" in text, f"{name} {config}: no Mosaic kernel in the TPU lowering"
    jax.clear_caches()
