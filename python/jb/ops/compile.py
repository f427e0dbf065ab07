"""``compile``: import an implementation and jit-compile it for the workload's inputs at the scale.

Result: status (ok | compile_error | runtime_error | unsupported | invalid | rejected: the
implementation tampered with the harness, see jb.guard; ``reasons`` and ``tainted`` then say so), compile_ms (trace +
lower + compile), trace_ms, cost {flops, bytes_accessed, transcendentals} of the compiled program,
cost_lowered (the pre-optimisation figure), memory {argument/output/temp/alias/peak bytes},
has_pallas_call, interpret, interpret_mode, error_class, error, trust (jb.impl.trust_level), plus:
host_callbacks, constants
(the largest closed-over constants), matmul_flops (split inside/outside pallas_call), module (the
HLO module name), first_run_ms (one run of the program unless ``args.run`` is false).
"""

from __future__ import annotations

import time

from jb import guard, trust
from jb.ops import common

_perf_counter = time.perf_counter


def _base(req, impl=None) -> dict:
    return {
        "status": None, "compile_ms": None, "trace_ms": None,
        "cost": {"flops": None, "bytes_accessed": None, "transcendentals": None},
        "cost_lowered": None, "memory": None, "has_pallas_call": None, "interpret": False,
        "interpret_mode": None, "error_class": None, "error": None,
        "impl": {"kind": getattr(impl, "kind", None), "name": getattr(impl, "name", None), "config": getattr(impl, "config", None)},
        "scale": req.scale, "backend": req.backend,
    }


def run(args: dict) -> dict:
    req = common.Request.from_args(args)
    wl = req.workload()
    inputs = wl.create_inputs()
    snapshot = guard.baseline()
    impl = req.impl(wl)
    result = trust.annotate(impl, _base(req, impl))
    try:
        return _compile(args, req, wl, inputs, impl, result)
    finally:
        reasons = guard.check(snapshot)
        if reasons:
            guard.restore(snapshot)
            result.update(status="rejected", reasons=reasons, tainted=True)


def _compile(args, req, wl, inputs, impl, result) -> dict:
    if not impl.ok:
        result.update(status=impl.status, error_class=impl.error_class, error=impl.error)
        return result
    try:
        built = common.build(impl.fn, wl, inputs, req)
    except common.CandidateFailure as failure:
        result.update(failure.as_result())
        return result
    report = trust.adjust_report(impl, common.jaxpr_report(built.jaxpr))
    result.update(
        compile_ms=built.compile_ms,
        trace_ms=built.trace_ms,
        cost=common.safe_cost(built.compiled),
        cost_lowered=common.safe_cost(built.lowered),
        memory=common.memory_dict(built.compiled),
        has_pallas_call=report["has_pallas_call"],
        interpret=bool(req.interpret and report["has_pallas_call"]),
        interpret_mode=trust.interpret_mode(impl, built.interpret_mode) if report["has_pallas_call"] else None,
        host_callbacks=report["host_callbacks"],
        constants=report["constants"][:5],
        matmul_flops=report["matmul_flops"],
        module=built.module_name,
        status="ok",
    )
    if args.get("run", True):
        try:
            t0 = _perf_counter()
            common.run(built, inputs)
            result["first_run_ms"] = (_perf_counter() - t0) * 1e3
        except common.CandidateFailure as failure:
            result.update(failure.as_result())
    return result
