"""Shared checks that every workload must pass (used by the per-group workload tests)."""

from __future__ import annotations

import pathlib

import jax
import numpy as np

from jb.compare import compare, to_host_leaves
from jb.inputs import resample
from jb.workload import load_workload

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORKLOADS = ROOT / "workloads"


def workload_dir(prefix: str) -> pathlib.Path:
    """Folder of the workload whose id is ``prefix`` (e.g. '12p')."""
    matches = [p for p in WORKLOADS.iterdir() if p.is_dir() and p.name.split("_")[0] == prefix]
    assert len(matches) == 1, f"workload {prefix}: found {matches}"
    return matches[0]


def run(wl, inputs):
    return jax.block_until_ready(wl.jitted()(*inputs))


def lint_workload(prefix: str, scale: str = "tiny") -> None:
    """Anti-gaming lints: finite, deterministic, seed- and distribution-sensitive, zeros fail."""
    wl = load_workload(workload_dir(prefix), scale)
    tol = wl.tolerance
    inputs = wl.create_inputs()
    out = run(wl, inputs)
    leaves = to_host_leaves(out)
    for leaf in leaves:
        assert np.all(np.isfinite(leaf.astype(np.float32))), f"{prefix}: non-finite reference output"
    # Two runs agree exactly.
    again = run(wl, inputs)
    for a, b in zip(leaves, to_host_leaves(again)):
        np.testing.assert_array_equal(a.astype(np.float32), b.astype(np.float32))
    # A kernel returning zeros must fail.
    zeros = jax.tree_util.tree_map(lambda x: np.zeros_like(np.asarray(x)), out)
    assert not compare(out, zeros, **tol).ok, f"{prefix}: an all-zero output passes the tolerance"
    biggest = max(float(np.abs(leaf.astype(np.float32)).max()) for leaf in leaves)
    assert biggest >= 10 * tol["atol"], f"{prefix}: reference magnitude {biggest} too close to atol"
    # Output changes with the seed and with the distribution.
    a = run(wl, resample(inputs, 1, "normal"))
    b = run(wl, resample(inputs, 2, "normal"))
    c = run(wl, resample(inputs, 1, "uniform"))
    assert not compare(a, b, **tol).ok, f"{prefix}: output does not change with the seed"
    assert not compare(a, c, **tol).ok, f"{prefix}: output does not change with the distribution"
    for variant in (a, b, c):
        for leaf in to_host_leaves(variant):
            assert np.all(np.isfinite(leaf.astype(np.float32))), f"{prefix}: non-finite output on resampled inputs"
