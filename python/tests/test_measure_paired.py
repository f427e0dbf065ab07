"""Paired, interleaved profiling (jb.ops.profile with ``pair``), its statistics (jb.stats), the
timed-output check, secret input seeds, the roofline guard and the device check, at tiny scale."""

from __future__ import annotations

import math
import pathlib

import numpy as np
import pytest

from jb import stats
from jb.ops import profile

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
GEMM_TINY = {"kind": "baseline", "path": str(ROOT / "tokamax_baselines/8p_GEMM/baseline.py"),
             "config": {"bm": 64, "bn": 448, "bk": 128}}


def wl(name: str) -> str:
    path = ROOT / "workloads" / name
    if not (path / "workload.py").is_file():
        pytest.skip(f"workload {name} not present")
    return str(path)


def cand(*parts: str) -> dict:
    return {"kind": "candidate", "path": str(ROOT.joinpath(*parts))}


# ---------------------------------------------------------------------------------------------
# jb.stats


def test_bootstrap_interval_brackets_the_median_and_shrinks_with_rounds():
    rng = np.random.default_rng(0)
    few = stats.bootstrap_median(1.5 + 0.05 * rng.standard_normal(10))
    many = stats.bootstrap_median(1.5 + 0.05 * rng.standard_normal(400))
    for iv in (few, many):
        assert iv.ci_low <= iv.point <= iv.ci_high
    assert many.half_width < few.half_width
    assert abs(many.point - 1.5) < 0.02
    assert stats.bootstrap_median([2.0]).as_dict() == {"point": 2.0, "ci_low": 2.0, "ci_high": 2.0, "n": 1}
    assert stats.bootstrap_median([]).point is None
    # Reproducible for the same rounds.
    assert stats.bootstrap_median([1.0, 1.1, 0.9, 1.2]) == stats.bootstrap_median([1.0, 1.1, 0.9, 1.2])


def test_round_ratios_and_convergence():
    assert stats.round_ratios([2.0, 3.0, None, 1.0], [1.0, 1.5, 1.0, 0.0]) == [2.0, 2.0]
    tight = stats.Interval(2.0, 1.98, 2.02, 10)
    wide = stats.Interval(2.0, 1.8, 2.2, 10)
    assert stats.converged([tight], 0.02) and not stats.converged([tight, wide], 0.02)
    assert stats.spread([1.0, 1.1, 0.9]) == pytest.approx(0.2)


# ---------------------------------------------------------------------------------------------
# The paired profile op


def test_paired_three_programs_rotate_and_give_intervals(tmp_path):
    r = profile.run({"workload": wl("8p_GEMM"), "scale": "tiny", "impl": cand("candidates", "8p_GEMM", "gemm_pallas.py"),
                     "pair": [{"kind": "xla"}, GEMM_TINY], "warmup": 1, "round_iters": 2,
                     "min_rounds": 3, "max_rounds": 4, "budget_s": 600, "out_dir": str(tmp_path)})
    assert r["status"] == "ok", r
    p = r["paired"]
    assert [q["role"] for q in p["programs"]] == ["impl", "xla", "handtuned"]
    # Rounds rotate the order: A B C, C A B, B C A, A B C.
    assert p["orders"][:4] == ["012", "201", "120", "012"][: len(p["orders"])]
    assert p["stop"] in ("converged", "max_rounds") and 3 <= p["rounds"] <= 4
    assert len(r["samples_ms"]) == 2 * p["rounds"]
    for role, field in (("xla", "speedup_vs_xla"), ("handtuned", "speedup_vs_handtuned")):
        s = r[field]
        assert s["rounds"] == p["rounds"] == len(p["ratios"][role])
        assert 0 < s["ci_low"] <= s["point"] <= s["ci_high"]
        assert s["stop"] == p["stop"]
    for q in p["programs"]:
        assert math.isfinite(q["median_ms"]) and q["n"] == 2 * p["rounds"] and q["module"].startswith("jit_jb_")
    # Every program's samples come from one clock (on CPU the host clock, untraced); the trace
    # file comes from a short session afterwards with every program in it.
    assert r["timing_source"] == p["timing_source"] == "host_clock", r["timing"]["notes"]
    assert (tmp_path / r["trace"]).is_file()
    assert all(r["timing"]["traced_ms"][role] > 0 for role in ("impl", "xla", "handtuned")), r["timing"]
    # The trace clock, asked for, times the same rounds from the CPU thunk events.
    t = profile.run({"workload": wl("8p_GEMM"), "scale": "tiny", "impl": cand("candidates", "8p_GEMM", "gemm_pallas.py"),
                     "pair": [{"kind": "xla"}], "warmup": 1, "round_iters": 2, "min_rounds": 2, "max_rounds": 2,
                     "budget_s": 600, "clock": "trace"})
    assert t["status"] == "ok" and t["timing_source"] == "trace:cpu_thunks", t["timing"]["notes"]
    assert t["speedup_vs_xla"]["rounds"] == 2


def test_paired_stops_on_budget(tmp_path):
    r = profile.run({"workload": wl("12p_RMSNorm"), "scale": "tiny", "impl": cand("candidates", "12p_RMSNorm", "rmsnorm_pallas.py"),
                     "pair": [{"kind": "xla"}], "warmup": 1, "budget_s": 0.0})
    assert r["status"] == "ok", r
    assert r["paired"]["stop"] == "budget" and r["paired"]["rounds"] == 1 and r["paired"]["budget_spent"] == "time"
    # Iterations per round chosen from the warmup times (microsecond programs: several).
    k = r["paired"]["round_iters"]
    assert 1 <= k <= profile.MAX_ROUND_ITERS and len(r["samples_ms"]) == k
    assert r["speedup_vs_xla"]["stop"] == "budget"


@pytest.mark.parametrize("clock", ["host", "trace"])
def test_paired_never_costs_more_than_separate_steps(clock):
    r = profile.run({"workload": wl("12p_RMSNorm"), "scale": "tiny", "impl": {"kind": "xla"},
                     "pair": [{"kind": "xla"}], "warmup": 2, "round_iters": 2, "iters": 7,
                     "step_overhead_s": 0.0, "min_rounds": 2, "budget_s": 600, "target": -1.0, "clock": clock})
    p = r["paired"]
    if clock == "trace":
        # Under a trace, nor more timed iterations than a separate step (trace events to parse).
        assert p["stop"] == "budget" and p["budget_spent"] in ("cost", "iterations")
        assert len(r["samples_ms"]) <= 7
    else:
        # The host clock leaves nothing to parse: only the cost rule ends the rounds.
        assert p["stop"] == "budget" and p["budget_spent"] == "cost"
    # The decision, not the duration (a busy machine stretches any duration): at least
    # min_rounds, and the cost rule said stop where it stopped.
    assert p["rounds"] >= 2 and p["round_iters"] == 2
    if p["budget_spent"] == "cost":
        assert profile.next_round_passes_cost(p["elapsed_s"], p["rounds"], p["cost_budget_s"])


def test_the_cost_rule_stops_before_a_round_that_would_pass_the_budget():
    # Rounds of 0.1 s each against a 1.0 s budget: after 9 rounds (0.9 s) a tenth would end at
    # 1.0 s (allowed), after 10 an eleventh would pass it.
    assert not profile.next_round_passes_cost(0.9, 9, 1.0 + 1e-9)
    assert profile.next_round_passes_cost(1.0, 10, 1.0)
    assert not profile.next_round_passes_cost(0.0, 0, 1.0)


def test_a_budget_asked_for_replaces_the_cost_rule():
    # jb eval --measure-budget passes cost_rule: false: the rounds go on past the separate steps'
    # cost, until the time budget (or convergence; target -1 never converges).
    r = profile.run({"workload": wl("12p_RMSNorm"), "scale": "tiny", "impl": {"kind": "xla"},
                     "pair": [{"kind": "xla"}], "warmup": 2, "round_iters": 2, "iters": 7,
                     "step_overhead_s": 0.0, "min_rounds": 2, "budget_s": 0.3, "max_rounds": 10**6,
                     "target": -1.0, "cost_rule": False})
    p = r["paired"]
    assert p["stop"] == "budget" and p["budget_spent"] == "time" and p["cost_rule"] is False
    # The decision, not the durations: the time budget ended it (with the cost rule on, the stop
    # would be `cost`), after at least the minimum rounds, every round's iterations recorded.
    assert p["rounds"] >= p["min_rounds"] and len(r["samples_ms"]) == p["rounds"] * p["round_iters"]


def test_round_plan_fits_the_budget():
    # A 200 ms interpret-mode kernel beside a 20 ms reference: one iteration each a round.
    k, budget = profile.plan_rounds([0.2, 0.02], iters=50, min_rounds=6, step_overhead_s=1.0)
    assert k == 1 and budget == pytest.approx(50 * 0.22 + 1.0)
    # Microsecond programs: as many as make a round of round_s, capped.
    k, _ = profile.plan_rounds([1e-5, 2e-5, 4e-5], iters=50, min_rounds=6)
    assert k == profile.MAX_ROUND_ITERS
    # A tight budget cuts the iterations so that min_rounds rounds fit, never below one.
    k, budget = profile.plan_rounds([1e-3, 1e-3], iters=12, min_rounds=6, step_overhead_s=0.0)
    assert k == 2 and 6 * 2 * 2e-3 <= budget + 1e-12
    assert profile.plan_rounds([0.2, 0.01], iters=6, min_rounds=6, fixed=3)[0] == 3


def test_unavailable_pair_program_is_skipped_not_fatal():
    bad = dict(GEMM_TINY, config={"bm": 7, "bn": 448, "bk": 128})  # an invalid block size
    r = profile.run({"workload": wl("8p_GEMM"), "scale": "tiny", "impl": {"kind": "xla"},
                     "pair": [{"kind": "xla"}, bad], "warmup": 0, "round_iters": 1, "max_rounds": 2, "min_rounds": 1})
    assert r["status"] == "ok", r
    assert [s["role"] for s in r["paired"]["skipped"]] == ["handtuned"]
    assert "speedup_vs_handtuned" not in r and r["speedup_vs_xla"]["point"] > 0


def test_secret_seeds_are_recorded_and_replayable():
    args = {"workload": wl("12p_RMSNorm"), "scale": "tiny", "impl": {"kind": "xla"}, "warmup": 0, "iters": 2, "input_sets": 2}
    a, b = profile.run(dict(args)), profile.run(dict(args))
    assert len(a["seeds"]) == 2 and a["seeds"] != b["seeds"]
    assert all(0 <= s < 2**63 for s in a["seeds"])
    c = profile.run(dict(args, seed=7))
    assert c["seeds"] == [7, 8]


def test_kernel_wrong_only_while_timed_is_rejected():
    r = profile.run({"workload": wl("12p_RMSNorm"), "scale": "tiny",
                     "impl": {"kind": "candidate", "path": str(FIXTURES / "candidates" / "measure_call_count.py")},
                     "pair": [{"kind": "xla"}], "warmup": 1, "round_iters": 2, "min_rounds": 2, "max_rounds": 3})
    assert r["status"] == "rejected", r
    assert any("timed output check failed" in x and "impl" in x for x in r["reasons"]), r["reasons"]
    assert any("host callbacks" in x for x in r["reasons"])


def test_unpaired_profile_checks_the_timed_output_too():
    r = profile.run({"workload": wl("12p_RMSNorm"), "scale": "tiny",
                     "impl": {"kind": "candidate", "path": str(FIXTURES / "candidates" / "measure_call_count.py")},
                     "warmup": 1, "iters": 5})
    assert r["status"] == "rejected"
    assert any("timed output check failed" in x for x in r["reasons"]), r["reasons"]


def test_roofline_rejects_on_accelerators_and_flags_on_cpu():
    def result():
        return {"median_ms": 1.0, "flops": 2e12, "bytes": 1e6, "reasons": [], "timing": {}}

    published = {"flops_per_s": 1e15, "bytes_per_s": 1e12, "source": "published"}  # bound: 2 ms
    r = result()
    assert profile._roofline(r, published, "gpu", "candidate") == "rejected"
    assert r["suspicious"] is True and r["roofline_ms"] == pytest.approx(2.0) and r["error_class"] == "roofline"
    r = result()
    assert profile._roofline(r, published, "cpu", "candidate") == "ok"
    assert r["suspicious"] is True and "flagged" in r["reasons"][0]
    # A measured peak is noisy: only below half the bound counts.
    r = result()
    assert profile._roofline(r, dict(published, source="measured"), "gpu", "candidate") == "ok"
    assert r["suspicious"] is False
    r = result()
    assert profile._roofline(r, {}, "gpu", "candidate") == "ok" and r["roofline_ms"] is None


# ---------------------------------------------------------------------------------------------
# The device check, as a CPU smoke test


def test_device_check_smoke_on_cpu(capsys):
    import jax

    if jax.default_backend() != "cpu":
        pytest.skip("the smoke test is for CPU; on a GPU run `jb doctor --device-check`")
    from jb.tools import device_check

    code = device_check.main(["--scale", "tiny", "--workloads", "12p,8p", "--budget", "1", "--iters", "3"])
    out = capsys.readouterr().out
    assert "XLA baseline" in out and "portable Pallas vs XLA (paired)" in out and "XLA vs itself" in out
    assert "host_clock" in out
    # Every row ran; at tiny scale on a shared CPU a 1 s self-pairing may miss ~1x by a few %,
    # which the check reports (exit 1) but which says nothing about the code.
    problems = [line for line in out.splitlines() if line.startswith("PROBLEM:")]
    assert all("not ~1x" in p for p in problems), out
    assert code == (1 if problems else 0)


def test_machine_drift_tool_times_windows():
    from jb.tools import machine_drift

    # A clock that moves 10 ms a reading, whatever the machine is doing: 0.4 s in 0.1-s windows
    # is 20 runs (two readings each) in 4 windows, each run taking 10 ms.
    ticks = iter(range(10**6))
    r = machine_drift.measure(0.4, 0.1, clock=lambda: next(ticks) * 0.01)
    assert r["runs"] == 20 and len(r["window_medians_ms"]) == 4, r
    assert r["window_medians_ms"] == pytest.approx([10.0] * 4) and r["spread"] == pytest.approx(0.0, abs=1e-9), r
    # And on the real clock it runs (how many windows fit depends on the machine's load).
    r = machine_drift.measure(0.2, 0.1)
    assert r["runs"] >= len(r["window_medians_ms"]) >= 1
    assert all(m > 0 for m in r["window_medians_ms"]) and r["spread"] >= 0
