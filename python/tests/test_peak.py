"""jb doctor's peak (issue 27.7): the FLOP/s peak is the best XLA reaches over sizes and dtypes,
so no XLA matmul jb measured runs above it, and on CPU it says it is an estimate."""

import jax

from jb.ops import peak


def test_peak_is_the_best_xla_matmul_over_sizes():
    r = peak.run({"bandwidth_mib": 16})
    by_size = r["matmul_by_size"]
    assert len(by_size) >= 2, by_size
    every = [f for per in by_size.values() for f in per.values()]
    assert r["flops_per_s"] == max(every)
    assert r["matmul_flops_per_s"] == by_size[str(r["matmul_n"])]
    assert r["estimate"] is (jax.default_backend() == "cpu")
    assert "fastest XLA matmul" in r["method"]


def test_one_size_when_asked():
    r = peak.run({"matmul_n": 128, "bandwidth_mib": 16})
    assert list(r["matmul_by_size"]) == ["128"] and r["matmul_n"] == 128
    assert r["flops_per_s"] == max(r["matmul_flops_per_s"].values())
