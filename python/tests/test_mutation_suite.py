"""jb.mutants and jb.tools.mutation_suite at tiny scale on two small workloads (issue 22.5).

The full 50-workload table is a script (python -m jb.tools.mutation_suite); here: the generator
makes each kind it should on a workload that has the operations, every mutant that changes the
exact answer beyond the honest bf16 deviation is caught by THE rule, the honest variants pass, and
the lint finds a degenerate workload when there is one.
"""

from __future__ import annotations

import pathlib

import jax.numpy as jnp
import numpy as np

from jb import mutants
from jb.tools import mutation_suite
from jb.workload import load_workload

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _name(prefix: str) -> str:
    (folder,) = [p for p in (ROOT / "workloads").iterdir() if p.name.split("_", 1)[0] == prefix]
    return folder.name


def _wl(prefix: str):
    return load_workload(ROOT / "workloads" / _name(prefix), "tiny")


def test_generator_kinds_on_a_gemm():
    wl = _wl("41k")
    names = {m.name for m in mutants.generate(wl, wl.create_inputs())}
    assert {"drop_term", "drop_bias", "swap_axis[0]", "const_input[0]", "const_input[2]", "low_precision"} <= names


def test_generator_integer_kinds_on_cross_entropy():
    wl = _wl("13p")
    base = wl.create_inputs()
    kinds = {m.kind for m in mutants.generate(wl, base)}
    assert "ignore_int" in kinds and "off_by_one" in kinds


def test_low_precision_mutant_is_bf16_accumulation():
    """The low_precision mutant of a gemm errs several bf16 roundings, in float32 too."""
    wl = _wl("41k")
    base32 = tuple(jnp.asarray(x, jnp.float32) for x in wl.create_inputs())
    (m,) = [m for m in mutants.generate(wl, base32) if m.name == "low_precision"]
    out = np.asarray(mutants.program(wl, base32, m)(base32), np.float64)
    ref = np.asarray(wl.fn(*base32), np.float64)
    one = np.asarray(jnp.asarray(ref, jnp.float32).astype(jnp.bfloat16).astype(jnp.float32), np.float64)
    rms = lambda a: float(np.sqrt(np.mean(a**2)))  # noqa: E731
    assert rms(out - ref) > 2 * rms(one - ref)


def test_suite_catches_every_required_mutant_and_accepts_honest_programs():
    r = mutation_suite.study(_name("41k"), "tiny", 1)
    assert r["required"], r["mutants"]
    assert r["misses"] == [], r["mutants"]
    assert all(h["ok"] for h in r["honest"].values()), r["honest"]
    assert r["lint"] == []


def test_lint_finds_a_degenerate_workload(tmp_path):
    """A workload whose output ignores an input (the published 26k's defect) is a lint finding."""
    src = (ROOT / "workloads" / _name("41k") / "workload.py").read_text()
    src = src.replace("def workload(x, weight, bias):", "def workload(x, weight, bias):\n    weight = weight * 0.0 + 0.02")
    folder = tmp_path / "workloads" / "99k_Degenerate"
    folder.mkdir(parents=True)
    (folder / "workload.py").write_text(src)
    old = mutation_suite.ROOT
    mutation_suite.ROOT = tmp_path
    try:
        r = mutation_suite.study("99k_Degenerate", "tiny", 1)
    finally:
        mutation_suite.ROOT = old
    assert any(f.startswith("input 1 replaced by its mean") for f in r["lint"]), r["lint"]
