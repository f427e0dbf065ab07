"""``profile``: warmup + timed iterations under ``jax.profiler.trace``; per-iteration device time from the trace.

Method (JAXBench): ahead-of-time compiled program, ``warmup`` untimed iterations (default 5), one
throwaway trace session (the first session in a process costs +15-30 %), then ``iters`` timed
iterations (default 50) inside one trace session, each followed by ``jax.block_until_ready`` on the
whole output pytree, rotating over ``input_sets`` distinct input sets (default 3: the workload's
own inputs and resampled ones), host wall-clock per iteration beside the trace. The trace is
parsed by jb.trace (device-plane module events on TPU/GPU, thunk events grouped by run_id on CPU,
events of this program's HLO module only); if it yields no usable events (or not one per
iteration), the wall-clock samples are used and ``timing_source`` says so.

FLOPs come from the workload's ``get_flops()`` or else the XLA reference's ``cost_analysis`` (never
from a Pallas kernel, whose interpret-mode count is wrong); ``bytes`` is the minimum traffic (input +
output bytes). Both are computed before the implementation is imported.
With ``args.peak`` = {flops_per_s, bytes_per_s} (from the ``peak`` op) the result also carries
``utilization``, ``roofline_ms`` and ``suspicious`` (more than 2x faster than the roofline allows).
Run-to-run diagnostics (trace/wall ratio, event counts, parse time, notes such as the wall-clock
fallback reason) go under ``timing``, which jb keeps out of output digests.
"""

from __future__ import annotations

import gc
import pathlib
import shutil
import tempfile
import time

import jax

from jb import guard, trust
from jb import trace as jbtrace
from jb.inputs import resample
from jb.ops import common

_perf_counter = time.perf_counter
# Flag a median below this fraction of the roofline time: measured peaks are noisy (a loaded
# machine measures a low peak), so only clearly impossible figures are flagged.
SUSPICIOUS_FRACTION = 0.5
_profiler_trace = jax.profiler.trace


def _reference_costs(wl, req, inputs) -> dict:
    """FLOPs of the workload's own jitted function (never of a kernel) and its minimum traffic."""
    out = {"flops": None, "flops_source": None, "bytes": None, "bytes_source": None}
    flops = wl.flops()
    if flops is not None:
        out["flops"], out["flops_source"] = float(flops), "get_flops"
    else:
        compiled = jax.jit(wl.fn, static_argnums=wl.static_argnums).trace(*inputs).lower().compile()
        cost = common.safe_cost(compiled)
        if cost["flops"] is not None:
            out["flops"], out["flops_source"] = cost["flops"], "xla_cost_analysis"
    shapes = jax.eval_shape(lambda *dyn: wl.fn(*_merge(inputs, dyn, wl.static_argnums)),
                            *[a for i, a in enumerate(inputs) if i not in wl.static_argnums])
    leaves = [x for x in jax.tree_util.tree_leaves(inputs) if hasattr(x, "nbytes")]
    leaves += jax.tree_util.tree_leaves(shapes)
    out["bytes"] = float(sum(int(x.size) * x.dtype.itemsize for x in leaves))
    out["bytes_source"] = "inputs+outputs"
    return out


def _merge(inputs, dyn, static_argnums):
    dyn = iter(dyn)
    return [a if i in static_argnums else next(dyn) for i, a in enumerate(inputs)]


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


def run(args: dict) -> dict:
    req = common.Request.from_args(args)
    wl = req.workload()
    # The paper's 5 warmups; the CPU needs more to settle (caches, page faults, thread pools).
    warmup = int(args.get("warmup", 10 if req.backend == "cpu" else 5))
    iters = int(args.get("iters", 50))
    n_sets = max(1, int(args.get("input_sets", 3)))
    if iters < 1 or warmup < 0:
        raise ValueError("iters must be >= 1 and warmup >= 0")
    base = wl.create_inputs()
    sets = [base] + [resample(base, 1000 + i, "normal") for i in range(1, n_sets)]
    result = {
        "status": None, "reasons": [], "samples_ms": [], "wall_samples_ms": [],
        "timing": {"notes": []},  # run-to-run diagnostics (jb keeps "timing" out of output digests)
        "median_ms": None, "mean_ms": None, "std_ms": None, "min_ms": None, "p90_ms": None,
        "wall_median_ms": None, "timing_source": None, "iters": iters, "warmup": warmup,
        "input_sets": n_sets, "interpret": False, "interpret_mode": None, "trace": None,
        "scale": req.scale, "backend": req.backend, "error_class": None, "error": None,
    }
    result.update(_reference_costs(wl, req, base))

    snapshot = guard.baseline()
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
    try:
        built = common.build(impl.fn, wl, sets[0], req)
    except common.CandidateFailure as failure:
        return finish(failure.status, **failure.fields())
    report = trust.adjust_report(impl, common.jaxpr_report(built.jaxpr))
    result["has_pallas_call"] = report["has_pallas_call"]
    result["interpret"] = bool(req.interpret and report["has_pallas_call"])
    result["interpret_mode"] = trust.interpret_mode(impl, built.interpret_mode) if report["has_pallas_call"] else None
    result["compile_ms"] = built.compile_ms
    result["module"] = built.module_name

    out_dir = req.out_dir()
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="jb_profile_"))
    try:
        try:
            for i in range(warmup):
                common.run(built, sets[i % n_sets])
            with _profiler_trace(str(scratch / "throwaway")):
                common.run(built, sets[0])
            gc.collect()
            wall = []
            trace_dir = scratch / "timed"
            with _profiler_trace(str(trace_dir)):
                for i in range(iters):
                    inputs = sets[i % n_sets]
                    t0 = _perf_counter()
                    out = built(*inputs)
                    common.block(out)
                    wall.append((_perf_counter() - t0) * 1e3)
                    del out
        except common.CandidateFailure as failure:
            return finish(failure.status, **failure.fields())
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - an exception inside the timed loop is the impl's
            return finish("runtime_error", **common.classify(exc, "run").fields())

        t0 = _perf_counter()
        try:
            events = jbtrace.load(trace_dir)
            timing = jbtrace.per_iteration(events, module=built.module_name)
        except Exception as exc:  # noqa: BLE001 - unreadable trace: fall back to wall-clock
            timing = jbtrace.Timing([], "none", built.module_name, 0, note=f"trace unreadable: {exc}")
        result["timing"]["trace_parse_ms"] = (_perf_counter() - t0) * 1e3
        result["timing"]["trace_events"] = timing.events
        result["trace"], result["trace_files"] = _copy_trace(trace_dir, out_dir)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    result["wall_samples_ms"] = wall
    result["wall_median_ms"] = common.stats(wall)["median_ms"]
    if timing.samples_ms and len(timing.samples_ms) == iters:
        samples, source = timing.samples_ms, f"trace:{timing.source}"
    else:
        samples, source = wall, "wall_clock"
        why = timing.note or f"trace had {len(timing.samples_ms)} runs of {built.module_name} for {iters} iterations"
        result["timing"]["notes"].append(f"timing from host wall-clock: {why}")
    result["samples_ms"] = samples
    result["timing_source"] = source
    result.update(common.stats(samples))

    median = result["median_ms"]
    if source != "wall_clock" and median and result["wall_median_ms"]:
        ratio = median / result["wall_median_ms"]
        result["timing"]["trace_wall_ratio"] = ratio
        if ratio > 1.05:
            result["timing"]["notes"].append(f"device time exceeds host wall-clock ({ratio:.2f}x): trace events overlap iterations?")
        elif ratio < 0.5 and result["wall_median_ms"] - median > 1.0:
            result["timing"]["notes"].append(f"device time is {ratio:.2f}x the host wall-clock: work outside the traced program?")
    flops = result.get("flops")
    result["tflops"] = (flops / (median * 1e-3) / 1e12) if flops and median else None
    peak = args.get("peak") or {}
    peak_flops, peak_bw = peak.get("flops_per_s"), peak.get("bytes_per_s")
    result["utilization"] = (flops / (median * 1e-3) / peak_flops) if flops and median and peak_flops else None
    bounds = []
    if flops and peak_flops:
        bounds.append(flops / peak_flops)
    if result.get("bytes") and peak_bw:
        bounds.append(result["bytes"] / peak_bw)
    if bounds and median:
        result["roofline_ms"] = max(bounds) * 1e3
        result["timing"]["roofline_fraction"] = median / result["roofline_ms"]
        result["suspicious"] = median < SUSPICIOUS_FRACTION * result["roofline_ms"]
        if result["suspicious"]:
            result["reasons"].append(
                f"median {median:.4g} ms is faster than the roofline bound {result['roofline_ms']:.4g} ms at the measured peak"
            )
    return finish("ok")
