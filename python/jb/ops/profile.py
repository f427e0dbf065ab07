"""``profile``: time an implementation, alone or paired with the XLA reference and the hand-tuned kernel.

Method. Every program is built ahead of time first (the XLA reference, the ``pair`` programs, then
the implementation - imported last, after the harness snapshot, as in verify), each gets ``warmup``
untimed iterations (default 10 on CPU, 5 elsewhere) and one more run (with the trace clock, in a
throwaway trace session: the first session in a process costs +15-30 %). Then the timed
iterations (with the trace clock, all in one trace session; see Clock below):

* alone (no ``pair``): ``iters`` iterations (default 50), as one round;
* paired (``pair``: a list of impl specs, e.g. ``[{"kind": "xla"}, {"kind": "baseline", ...}]``):
  alternating rounds, the order rotated each round (A B C, C A B, B C A, ...), every program on the
  same input sets; ``round_iters`` iterations of each a round (default: as many as make a round
  of about ``round_s`` = 0.05 s, between 1 and 20: slow interpret-mode kernels get one iteration a
  round and so more rounds, microsecond programs enough to average out timer noise). After ``min_rounds`` rounds
  (default 6) the rounds stop when every speedup's bootstrap 95 % interval (jb.stats; from the live
  host wall-clock rounds) has a half-width of at most ``target`` (default 2 %) of the speedup
  (``stop: "converged"``), when the budget is spent (``"budget"``): ``budget_s`` seconds (default
  20) of timed rounds (``budget_spent: "time"``), or the cost of the separate profile steps it
  replaces (``"cost"``): the rounds' wall time (output checks included) reaches ``iters``
  (default 50) iterations of each program at its warmup time, plus ``step_overhead_s`` (1 s, a
  separate step's measured fixed cost) for each step saved, or (trace clock only: the trace's
  events are parsed after the rounds) ``"iterations"``: ``iters`` timed iterations of each
  program, what a separate step times; or at
  ``max_rounds`` (default 200). ``paired.cost_budget_s`` and ``paired.timed_s`` show the account.
  ``cost_rule: false`` (what ``jb eval --measure-budget`` passes) lifts the cost rule: then
  ``budget_s`` alone bounds the rounds.

Clock (``clock``). On TPU/GPU (``trace``, their default) the timed iterations run in one trace
session, parsed by jb.trace per program (each program is compiled under its own module name,
``jit_jb_<role>``): device-plane module events, or on CPU thunk events grouped by run_id. On CPU
the default is ``host``: the device is the host, and a trace session disturbs what it measures
there - the profiler's event buffers share the allocator with XLA's temporaries, so the 1p XLA
reference faults ~7000 fresh pages a run and takes 9-11 ms instead of 4.5 ms in some processes
and not others, and the 8p reference runs 30 % slower with 2.5x the spread. So the timed
iterations run untraced, timed by the host clock around each run (``timing_source:
host_clock``), and afterwards ``trace_iters`` (default 2) iterations of every program run in a
short trace session of their own, for the trace file and the trace/host-clock cross-check
(``timing.traced_ms``, ``timing.traced_wall_ms``, ``timing.trace_wall_ratio``).

Per-round times are the median of a round's iterations; a speedup is the median over rounds of
``t_other / t_impl`` with a bootstrap 95 % interval, reported as ``speedup_vs_xla`` /
``speedup_vs_handtuned`` = {point, ci_low, ci_high, rounds, stop}, with every program's absolute
median and spread under ``paired.programs``. With the trace clock, if the trace does not give
exactly one event group per iteration for every program, the host wall-clock samples are used
for all of them (``timing_source: wall_clock``), so that both sides of a ratio always come from
the same clock.

Input sets: ``input_sets`` (default 3) sets drawn from seeds the judge takes from OS randomness
(``secrets``) unless ``seed`` is given (then ``seed + i``); the seeds are recorded (``seeds``).
The timed output is checked: every timed iteration's output of every program other than the XLA
reference is compared on the device, by a comparison program compiled before the implementation
is imported, with the judgement verify makes (jb.compare.DeviceCheck: the same noise bound of
jb.tolerance, measured on that input set; never a stricter flat tolerance).
A program that is wrong while timed is ``rejected`` (``timed_output``), as is a candidate with
host callbacks (its timed work could happen on the host, out of the trace's sight).

FLOPs come from the workload's ``get_flops()`` or else the XLA reference's ``cost_analysis`` (never
from a Pallas kernel, whose interpret-mode count is wrong); ``bytes`` is the minimum traffic (input +
output bytes). With ``args.peak`` = {flops_per_s, bytes_per_s[, source]} (jb passes the published
peak of the device, else the one `jb doctor` measured) the result carries ``roofline_ms`` and
``suspicious`` (achieved TFLOP/s and utilisation are jb's to compute, from ``flops`` and the median:
src/device/roofline.rs): on an accelerator a median below the roofline bound (half of it
with a measured peak) is ``rejected``; on CPU it is only flagged.
Run-to-run diagnostics (trace/wall ratio, event counts, parse time, notes such as the wall-clock
fallback reason) go under ``timing``, which jb keeps out of output digests.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import pathlib
import secrets
import shutil
import tempfile
import time

import jax
import numpy as np

from jb import guard, trust
from jb import inputs as jbinputs
from jb import stats as jbstats
from jb import trace as jbtrace
from jb.compare import DeviceCheck
from jb.impl import resolve
from jb.ops import common
from jb.tolerance import NoiseModel, rule_of

_perf_counter = time.perf_counter
_tree_leaves = jax.tree_util.tree_leaves
_tree_structure = jax.tree_util.tree_structure
# Flag a median below this fraction of the roofline time when the peak is measured (a loaded
# machine measures a low peak); a published peak is a hard bound.
SUSPICIOUS_FRACTION = 0.5
_profiler_trace = jax.profiler.trace

ROUND_S = 0.05
MAX_ROUND_ITERS = 20
# What a separate profile step costs beyond its timed iterations on a warm judge (dispatch, build,
# warmup, two trace sessions, parsing): 0.96 s (tiny) and 1.26 s (cpu) on average over the run
# database's unpaired profile steps on the 2-core development machine. A paired measurement of n
# programs replaces n such steps by one, so its timed rounds may use that much more time.
STEP_OVERHEAD_S = 1.0
MIN_ROUNDS = 6
MAX_ROUNDS = 200
BUDGET_S = 20.0
TARGET = 0.02
LIVE_BOOT = 500
# With the host clock (CPU), iterations of each program run in a short trace session after the
# timed rounds, for the trace file and the trace/host-clock cross-check (never for timing).
TRACE_ITERS = 2


@dataclasses.dataclass
class Program:
    """One timed program: its role (``impl`` for the profiled implementation, ``xla``,
    ``handtuned``), its build and whether its output is checked against the reference."""

    role: str
    built: common.Built
    spec: dict
    checked: bool
    wall: list = dataclasses.field(default_factory=list)  # per iteration, ms
    rounds: list = dataclasses.field(default_factory=list)  # per round: indices into wall
    samples: list = dataclasses.field(default_factory=list)  # chosen clock, per iteration
    runs: int = 0  # every run in the timed rounds, the untimed switch-warmups included (the trace clock matches them to events)
    traced_wall: list = dataclasses.field(default_factory=list)  # host clock, ms: the trace-only iterations
    timed: list = dataclasses.field(default_factory=list)  # which of those runs are timed


def _named(fn, name: str):
    """``fn`` under another name, so that its XLA module (``jit_<name>``) is told apart in traces."""

    def program(*args):
        return fn(*args)

    program.__name__ = program.__qualname__ = name
    return program


def _build_trusted(fn, name, wl, inputs, req) -> common.Built:
    try:
        return common._build_once(_named(fn, name), inputs, wl.static_argnums, None)  # noqa: SLF001
    except common.CandidateFailure as failure:
        raise common.WorkloadError(f"the reference {wl.name}:workload failed ({failure.error_class}): {failure.message}") from failure


def _reference_costs(wl, ref_built, inputs) -> dict:
    """FLOPs of the workload's own program (never of a kernel) and its minimum traffic."""
    out = {"flops": None, "flops_source": None, "bytes": None, "bytes_source": None}
    flops = wl.flops()
    if flops is not None:
        out["flops"], out["flops_source"] = float(flops), "get_flops"
    else:
        cost = common.safe_cost(ref_built.compiled)
        if cost["flops"] is not None:
            out["flops"], out["flops_source"] = cost["flops"], "xla_cost_analysis"
    leaves = [x for x in _tree_leaves(inputs) if hasattr(x, "nbytes")]
    leaves += list(ref_built.jaxpr.out_avals)
    out["bytes"] = float(sum(int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize for x in leaves))
    out["bytes_source"] = "inputs+outputs"
    return out


def _copy_trace(src_root: pathlib.Path, out_dir: pathlib.Path | None) -> tuple[str | None, list[str]]:
    files = jbtrace.find_trace_files(src_root)
    if out_dir is None or not files:
        return None, []
    dest = out_dir / "trace"
    dest.mkdir(parents=True, exist_ok=True)
    copied = []
    for kind in ("json", "xplane"):
        if kind in files:
            target = dest / files[kind].name
            shutil.copy2(files[kind], target)
            copied.append(str(target.relative_to(out_dir)))
    return (copied[0] if copied else None), copied


def _seeds(args: dict, n: int) -> list[int]:
    if args.get("seed") is not None:
        return [int(args["seed"]) + i for i in range(n)]
    return [secrets.randbits(63) for _ in range(n)]


def _input_set(wl, base, seed: int):
    make_trial = getattr(jbinputs, "make_trial", None)
    if make_trial is not None:
        return make_trial(wl, base, seed, "normal")
    return jbinputs.resample(base, seed, "normal")


def _make_checkers(wl, base, ref_outs, sets) -> list[DeviceCheck]:
    """One device check per input set, built before the implementation is imported: the judgement
    verify makes (jb.compare.judge: the noise bound of jb.tolerance measured on that input set, or
    the flat rule where it falls back), compiled to run on the device beside the timed program."""
    rule = rule_of(wl)
    noise = NoiseModel(wl, base)
    checks = []
    for out, inputs in zip(ref_outs, sets):
        hi, emu = noise.evaluate(inputs)
        checks.append(DeviceCheck(jax.device_get(out), hi, emu, rule))
    return checks


class TimedOutputError(Exception):
    def __init__(self, role: str, message: str):
        super().__init__(f"{role}: {message}")
        self.role = role


def _check_output(checker: DeviceCheck, ref_leaves, ref_def, out, role: str, set_index: int):
    """Dispatch the comparison of one timed output (verdict read after the round)."""
    if _tree_structure(out) != ref_def:
        raise TimedOutputError(role, f"timed output structure {_tree_structure(out)} differs from the reference {ref_def}")
    leaves = list(_tree_leaves(out))
    for i, (r, c) in enumerate(zip(ref_leaves, leaves)):
        if getattr(c, "shape", None) != r.shape or getattr(c, "dtype", None) != r.dtype:
            raise TimedOutputError(
                role, f"timed output {i} is {getattr(c, 'dtype', type(c).__name__)}{tuple(getattr(c, 'shape', ()))}, "
                f"the reference's {r.dtype}{tuple(r.shape)} (input set {set_index})"
            )
    result = checker.dispatch(leaves)
    common.block(result)
    return result


def _rotation(n: int, r: int) -> list[int]:
    """Round ``r``'s order of ``n`` programs: 0 1 2, 2 0 1, 1 2 0, ..."""
    return [(j - r) % n for j in range(n)]


def _round_times(samples: list[float], rounds: list[list[int]]) -> list[float | None]:
    out = []
    for idx in rounds:
        vals = [samples[i] for i in idx if i < len(samples)]
        out.append(float(np.median(vals)) if vals else None)
    return out


def next_round_passes_cost(elapsed_s: float, rounds: int, cost_budget_s: float) -> bool:
    """The cost rule: whether one more round (estimated as the mean round so far) would take the
    paired rounds past ``cost_budget_s``, what the separate profile steps would have cost."""
    return elapsed_s + elapsed_s / max(1, rounds) > cost_budget_s


def plan_rounds(per_iter_s: list[float], iters: int, min_rounds: int, *, round_s: float = ROUND_S,
                step_overhead_s: float = STEP_OVERHEAD_S, fixed: int | None = None) -> tuple[int, float]:
    """Iterations per round (of every program) and the cost budget (seconds) of the rounds.

    Every program gets the same number of iterations a round: as many as make a round of about
    ``round_s`` (at least one, at most ``MAX_ROUND_ITERS``), cut so that ``min_rounds`` rounds
    fit in the budget. (Giving a fast reference more iterations than a slow kernel, for the same
    time each, was tried: its round medians were no steadier - what varies is the state each
    program finds after the other ran - and it left fewer rounds: wider intervals.) The budget is
    what the separate profile steps of the same programs would spend: ``iters`` iterations each
    plus their fixed cost (``step_overhead_s`` for each step the pairing saves).
    """
    t = [max(float(x), 1e-9) for x in per_iter_s]
    n = len(t)
    budget = iters * sum(t) + (n - 1) * step_overhead_s
    if fixed is not None:
        return fixed, budget
    k = max(1, min(MAX_ROUND_ITERS, int(round_s / sum(t))))
    return max(1, min(k, int(budget / (min_rounds * sum(t))))), budget


def _live_converged(programs: list[Program], target: float) -> bool:
    impl = programs[0]
    impl_rounds = _round_times(impl.wall, impl.rounds)
    intervals = []
    for p in programs[1:]:
        ratios = jbstats.round_ratios(_round_times(p.wall, p.rounds), impl_rounds)
        intervals.append(jbstats.bootstrap_median(ratios, n_boot=LIVE_BOOT))
    return jbstats.converged(intervals, target)


def run(args: dict) -> dict:
    req = common.Request.from_args(args)
    wl = req.workload()
    # The paper's 5 warmups; the CPU needs more to settle (caches, page faults, thread pools).
    warmup = int(args.get("warmup", 10 if req.backend == "cpu" else 5))
    iters = int(args.get("iters", 50))
    n_sets = max(1, int(args.get("input_sets", 3)))
    pair_specs = list(args.get("pair") or [])
    paired = bool(pair_specs)
    fixed_round_iters = args.get("round_iters")
    switch_warmup = bool(args.get("switch_warmup", False))
    round_iters = int(fixed_round_iters) if fixed_round_iters is not None else 1
    min_rounds = int(args.get("min_rounds", MIN_ROUNDS))
    max_rounds = int(args.get("max_rounds", MAX_ROUNDS)) if paired else 1
    budget_s = float(args.get("budget_s", BUDGET_S))
    # False (jb eval --measure-budget): budget_s alone bounds the rounds, not the separate steps' cost.
    cost_rule = bool(args.get("cost_rule", True))
    target = float(args.get("target", TARGET))
    clock = str(args.get("clock") or ("host" if req.backend == "cpu" else "trace"))
    if clock not in ("host", "trace"):
        raise ValueError(f"clock must be 'host' or 'trace', not {clock!r}")
    timed_in_trace = clock == "trace"
    trace_iters = max(0, int(args.get("trace_iters", TRACE_ITERS)))
    if iters < 1 or warmup < 0 or round_iters < 1 or max_rounds < 1 or min_rounds < 1:
        raise ValueError("iters, round_iters, min_rounds and max_rounds must be >= 1 and warmup >= 0")
    seeds = _seeds(args, n_sets)
    base = wl.create_inputs()
    sets = [_input_set(wl, base, s) for s in seeds]
    result = {
        "status": None, "reasons": [], "samples_ms": [], "wall_samples_ms": [],
        "timing": {"notes": []},  # run-to-run diagnostics (jb keeps "timing" out of output digests)
        "median_ms": None, "mean_ms": None, "std_ms": None, "min_ms": None, "p90_ms": None,
        "wall_median_ms": None, "timing_source": None, "iters": None, "warmup": warmup,
        "input_sets": n_sets, "seeds": seeds, "interpret": False, "interpret_mode": None, "trace": None,
        "scale": req.scale, "backend": req.backend, "error_class": None, "error": None,
    }

    # 1. Trusted programs first: the reference (also the XLA pair program), its outputs on every
    #    input set, the output checker, and the pair's library baselines.
    ref_built = _build_trusted(wl.fn, "jb_xla", wl, sets[0], req)
    result.update(_reference_costs(wl, ref_built, sets[0]))
    ref_outs = [common.run_reference(ref_built, s) for s in sets]
    ref_def = _tree_structure(ref_outs[0])
    ref_leaves = [list(_tree_leaves(o)) for o in ref_outs]
    checkers = _make_checkers(wl, base, ref_outs, sets)
    result["tolerance"] = rule_of(wl).as_dict()
    del base

    def role_of(spec: dict) -> str:
        return {"xla": "xla", "baseline": "handtuned"}.get(spec.get("kind", "xla"), str(spec.get("kind")))

    others: list[Program] = []
    skipped: list[dict] = []
    for spec in pair_specs:
        role = role_of(spec)
        if spec.get("kind", "xla") == "xla":
            others.append(Program(role, ref_built, {"kind": "xla"}, checked=False))
            continue
        pimpl = resolve(spec, wl, req.backend, req.interpret)
        if not pimpl.ok:
            skipped.append({"role": role, "status": pimpl.status, "error": pimpl.error})
            continue
        try:
            pbuilt = common.build(_named(pimpl.fn, f"jb_{role}"), wl, sets[0], req)
            verdict = checkers[0].verdict(_check_output(checkers[0], ref_leaves[0], ref_def, common.run(pbuilt, sets[0]), role, 0))
        except common.CandidateFailure as failure:
            skipped.append({"role": role, "status": failure.status, "error": failure.message})
            continue
        except TimedOutputError as exc:
            skipped.append({"role": role, "status": "incorrect", "error": str(exc)})
            continue
        if not verdict.ok:
            skipped.append({"role": role, "status": "incorrect", "error": verdict.reason})
            continue
        others.append(Program(role, pbuilt, {"kind": pimpl.kind, "name": pimpl.name, "config": pimpl.config}, checked=True))

    # 2. The implementation, after the harness snapshot.
    snapshot = guard.baseline()
    spec = args.get("impl") or {"kind": "xla"}
    impl = req.impl(wl)
    result["impl"] = {"kind": impl.kind, "name": impl.name, "config": impl.config}
    trust.annotate(impl, result)

    def finish(status: str, **extra) -> dict:
        rejects = guard.check(snapshot)
        if rejects:
            guard.restore(snapshot)
            status = "rejected"
            result["reasons"] = rejects + result["reasons"]
            result["tainted"] = True
        result.update(extra)
        result["status"] = status
        return result

    if not impl.ok:
        return finish(impl.status, error_class=impl.error_class, error=impl.error)
    if impl.kind == "xla":
        # Paired with itself, XLA needs a second build under its own module name.
        built = _build_trusted(wl.fn, "jb_impl", wl, sets[0], req) if any(p.built is ref_built for p in others) else ref_built
        main = Program("impl", built, {"kind": "xla"}, checked=False)
    else:
        try:
            built = common.build(_named(impl.fn, "jb_impl"), wl, sets[0], req)
        except common.CandidateFailure as failure:
            return finish(failure.status, **failure.fields())
        main = Program("impl", built, dict(spec), checked=True)
    report = trust.adjust_report(impl, common.jaxpr_report(main.built.jaxpr))
    result["has_pallas_call"] = report["has_pallas_call"]
    result["interpret"] = bool(req.interpret and report["has_pallas_call"])
    result["interpret_mode"] = trust.interpret_mode(impl, main.built.interpret_mode) if report["has_pallas_call"] else None
    result["compile_ms"] = main.built.compile_ms
    result["module"] = main.built.module_name
    # Host callbacks: the timed work could run on the host, out of the trace's sight. Measured
    # anyway (the output check runs too), then rejected.
    host_callbacks = impl.kind not in ("xla", "baseline") and bool(report["host_callbacks"])
    if host_callbacks:
        result["reasons"].append(f"host callbacks in the timed program: {', '.join(report['host_callbacks'])}")

    programs = [main] + others
    n = len(programs)
    out_dir = req.out_dir()
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="jb_profile_"))
    orders: list[str] = []
    stop = "iters"
    budget_spent = None
    checks: list[tuple] = []  # (program index, set index, device result)
    elapsed = 0.0
    gc_enabled = gc.isenabled()
    try:
        try:
            per_iter_s = []  # per program: the median of its settled warmup runs and the throwaway run
            for p in programs:
                times = []
                for i in range(warmup):
                    t0 = _perf_counter()
                    common.run(p.built, sets[i % n_sets])
                    times.append(_perf_counter() - t0)
                per_iter_s.append(times[len(times) // 2:])
            # Trace clock: a throwaway session first (the first in a process costs +15-30 %).
            # Host clock: the same extra run, untraced (it feeds the per-iteration estimate).
            with _profiler_trace(str(scratch / "throwaway")) if timed_in_trace else contextlib.nullcontext():
                for p, times in zip(programs, per_iter_s):
                    t0 = _perf_counter()
                    common.run(p.built, sets[0])
                    times.append(_perf_counter() - t0)
            per_iter_s = [float(np.median(t)) for t in per_iter_s]
            if paired:
                round_iters, cost_budget_s = plan_rounds(
                    per_iter_s, iters, min_rounds, round_s=float(args.get("round_s", ROUND_S)),
                    step_overhead_s=float(args.get("step_overhead_s", STEP_OVERHEAD_S)),
                    fixed=int(fixed_round_iters) if fixed_round_iters is not None else None)
            else:
                round_iters, cost_budget_s = iters, math.inf
            gc.collect()
            # No garbage collection inside a timed run (as timeit): a full collection of the
            # judge's objects takes milliseconds, as long as a cpu-scale XLA program.
            gc.disable()
            trace_dir = scratch / "timed"
            with _profiler_trace(str(trace_dir)) if timed_in_trace else contextlib.nullcontext():
                t_start = _perf_counter()
                r = 0
                while True:
                    order = _rotation(n, r) if paired else list(range(n))
                    orders.append("".join(str(j) for j in order))
                    for j in order:
                        p = programs[j]
                        idx = []
                        if paired and switch_warmup:
                            # Optional (args.switch_warmup): the first run after another program
                            # untimed, as a separate step's warmup would be. Off by default: it
                            # doubles the runs of slow programs (one timed iteration a round) and
                            # did not remove the one switching effect measured here (1p's XLA
                            # program at 4.4 or 8.7 ms per invocation beside an interpret-mode
                            # kernel, whatever the block size).
                            common.block(p.built(*sets[r % n_sets]))
                            p.runs += 1
                        for it in range(round_iters):
                            s = (r + it) % n_sets
                            inputs = sets[s]
                            t0 = _perf_counter()
                            out = p.built(*inputs)
                            common.block(out)
                            p.wall.append((_perf_counter() - t0) * 1e3)
                            p.timed.append(p.runs)
                            p.runs += 1
                            idx.append(len(p.wall) - 1)
                            if p.checked:
                                checks.append((j, s, _check_output(checkers[s], ref_leaves[s], ref_def, out, p.role, s)))
                            del out
                        p.rounds.append(idx)
                    r += 1
                    bad = [(j, s, v) for j, s, res in checks for v in [checkers[s].verdict(res)] if not v.ok]
                    checks.clear()
                    if bad:
                        j, s, v = bad[0]
                        raise TimedOutputError(
                            programs[j].role, f"timed output wrong on input set {s} (round {r}): {v.reason} "
                            f"(the verify judgement, rule {v.rule})"
                        )
                    elapsed = _perf_counter() - t_start
                    if not paired:
                        break
                    if r >= min_rounds and _live_converged(programs, target):
                        stop = "converged"
                        break
                    if elapsed >= budget_s:
                        stop, budget_spent = "budget", "time"
                        break
                    if cost_rule and r >= min_rounds and next_round_passes_cost(elapsed, r, cost_budget_s):
                        # The next round would take the rounds (their output checks included)
                        # past what the separate profile steps of these programs would cost.
                        stop, budget_spent = "budget", "cost"
                        break
                    if timed_in_trace and len(main.wall) + round_iters > iters:
                        # With the trace clock, nor more timed iterations of a program than its
                        # separate step: each adds trace events to record and parse after the
                        # rounds (for interpret-mode kernels thousands, seconds in all). The
                        # host clock adds nothing after the rounds: the cost rule alone holds.
                        stop, budget_spent = "budget", "iterations"
                        break
                    if r >= max_rounds:
                        stop = "max_rounds"
                        break
            if not timed_in_trace and trace_iters:
                # Host clock: a few untimed-for-the-result iterations of every program in their own
                # trace session, for the trace file and the trace/host-clock cross-check.
                with _profiler_trace(str(trace_dir)):
                    for p in programs:
                        for i in range(trace_iters):
                            t0 = _perf_counter()
                            common.block(p.built(*sets[i % n_sets]))
                            p.traced_wall.append((_perf_counter() - t0) * 1e3)
        except TimedOutputError as exc:
            result["reasons"].append(f"timed output check failed: {exc}")
            if exc.role == "impl":
                return finish("rejected", error_class="timed_output")
            raise common.WorkloadError(f"a pair program failed the timed output check: {exc}") from exc
        except common.CandidateFailure as failure:
            return finish(failure.status, **failure.fields())
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - an exception inside the timed loop is the impl's
            return finish("runtime_error", **common.classify(exc, "run").fields())

        t0 = _perf_counter()
        timings: list[jbtrace.Timing] = []
        try:
            if not trace_dir.exists():
                raise FileNotFoundError("no trace session (trace_iters: 0)")
            events = jbtrace.load(trace_dir)
            for p in programs:
                timings.append(jbtrace.per_iteration(events, module=p.built.module_name))
        except Exception as exc:  # noqa: BLE001 - unreadable trace: fall back to wall-clock
            timings = [jbtrace.Timing([], "none", p.built.module_name, 0, note=f"trace unreadable: {exc}") for p in programs]
        result["timing"]["trace_parse_ms"] = (_perf_counter() - t0) * 1e3
        result["timing"]["trace_events"] = sum(t.events for t in timings)
        result["trace"], result["trace_files"] = _copy_trace(trace_dir, out_dir)
    finally:
        if gc_enabled:
            gc.enable()
        shutil.rmtree(scratch, ignore_errors=True)

    # 3. One clock for every program: the host clock (CPU: the device is the host), else the
    #    trace if it has one run per iteration of each.
    if not timed_in_trace:
        source = "host_clock"
        for p in programs:
            p.samples = list(p.wall)
        result["timing"]["traced_ms"] = {
            p.role: (float(np.median(t.samples_ms)) if len(t.samples_ms) == len(p.traced_wall) and t.samples_ms else None)
            for t, p in zip(timings, programs)}
        result["timing"]["traced_wall_ms"] = {p.role: (float(np.median(p.traced_wall)) if p.traced_wall else None) for p in programs}
    elif all(len(t.samples_ms) == p.runs for t, p in zip(timings, programs)):
        source = f"trace:{timings[0].source}"
        for t, p in zip(timings, programs):
            p.samples = [t.samples_ms[i] for i in p.timed]
    else:
        source = "wall_clock"
        for t, p in zip(timings, programs):
            p.samples = list(p.wall)
            if len(t.samples_ms) != p.runs:
                why = t.note or f"trace had {len(t.samples_ms)} runs of {p.built.module_name} for {p.runs} runs"
                result["timing"]["notes"].append(f"timing from host wall-clock: {why}")

    result["iters"] = len(main.wall)
    result["wall_samples_ms"] = main.wall
    result["wall_median_ms"] = common.stats(main.wall)["median_ms"]
    result["samples_ms"] = main.samples
    result["timing_source"] = source
    result.update(common.stats(main.samples))

    if paired:
        impl_rounds = _round_times(main.samples, main.rounds)
        speedups: dict[str, dict] = {}
        ratios: dict[str, list[float]] = {}
        for p in others:
            rr = jbstats.round_ratios(_round_times(p.samples, p.rounds), impl_rounds)
            iv = jbstats.bootstrap_median(rr)
            ratios[p.role] = rr
            speedups[p.role] = {"point": iv.point, "ci_low": iv.ci_low, "ci_high": iv.ci_high,
                                "rounds": iv.n, "stop": stop}
        result["paired"] = {
            "programs": [{"role": p.role, "impl": p.spec, "module": p.built.module_name,
                          **jbstats.summary(p.samples), "wall_median_ms": common.stats(p.wall)["median_ms"],
                          "round_ms": _round_times(p.samples, p.rounds)}
                         for p in programs],
            "rounds": len(main.rounds), "round_iters": round_iters,
            "per_iter_ms_estimate": {p.role: t * 1e3 for p, t in zip(programs, per_iter_s)},
            "cost_budget_s": cost_budget_s, "cost_rule": cost_rule, "timed_s": sum(sum(q.wall) for q in programs) / 1e3, "switch_warmup": switch_warmup, "orders": orders, "stop": stop,
            "elapsed_s": elapsed, "budget_s": budget_s, "budget_spent": budget_spent, "budget_iters": iters, "target": target, "min_rounds": min_rounds,
            "max_rounds": max_rounds, "timing_source": source, "ratios": ratios, "skipped": skipped,
        }
        if "xla" in speedups:
            result["speedup_vs_xla"] = speedups["xla"]
        if "handtuned" in speedups:
            result["speedup_vs_handtuned"] = speedups["handtuned"]

    if source == "host_clock":
        # The cross-check runs on the traced iterations: trace time over their host clock.
        median, wall_median = result["timing"]["traced_ms"].get("impl"), result["timing"]["traced_wall_ms"].get("impl")
    else:
        median, wall_median = result["median_ms"], result["wall_median_ms"]
    if source != "wall_clock" and median and wall_median:
        ratio = median / wall_median
        result["timing"]["trace_wall_ratio"] = ratio
        if ratio > 1.05:
            result["timing"]["notes"].append(f"device time exceeds host wall-clock ({ratio:.2f}x): trace events overlap iterations?")
        elif ratio < 0.5 and wall_median - median > 1.0:
            result["timing"]["notes"].append(f"device time is {ratio:.2f}x the host wall-clock: work outside the traced program?")
    status = _roofline(result, args.get("peak") or {}, req.backend, impl.kind)
    if host_callbacks:
        return finish("rejected", error_class="host_callback")
    return finish(status)


def _roofline(result: dict, peak: dict, backend: str, kind: str) -> str:
    """The roofline guard; the status (``rejected`` below the bound on accelerators)."""
    median, flops = result["median_ms"], result.get("flops")
    peak_flops, peak_bw = peak.get("flops_per_s"), peak.get("bytes_per_s")
    result["roofline_ms"] = None
    result["suspicious"] = None
    bounds = []
    if flops and peak_flops:
        bounds.append(flops / peak_flops)
    if result.get("bytes") and peak_bw:
        bounds.append(result["bytes"] / peak_bw)
    if not (bounds and median):
        return "ok"
    result["roofline_ms"] = max(bounds) * 1e3
    result["peak_source"] = peak.get("source", "measured")
    fraction = 1.0 if result["peak_source"] == "published" else SUSPICIOUS_FRACTION
    result["timing"]["roofline_fraction"] = median / result["roofline_ms"]
    result["suspicious"] = median < fraction * result["roofline_ms"]
    if not result["suspicious"]:
        return "ok"
    text = (f"median {median:.4g} ms is faster than the roofline bound {result['roofline_ms']:.4g} ms "
            f"at the {result['peak_source']} peak")
    if backend != "cpu" and kind != "xla" and not math.isnan(median):
        result["reasons"].append(text)
        result["error_class"] = "roofline"
        return "rejected"
    result["reasons"].append(text + " (flagged, not rejected, on CPU)")
    return "ok"
