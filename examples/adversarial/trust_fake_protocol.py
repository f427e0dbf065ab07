# target: 12p_RMSNorm
# expect: rejected
# exploit: forged verdict - at import, finds the worker's protocol writer (the jb.worker.Worker object,
#          through gc) and the id of the request being answered (the stack), writes its own answer
#          line ("correct" for verify, "ok" with a 5000x timing for other ops) and exits before the
#          harness can answer; its kernel writes zeros
import gc
import os
import sys

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _forge():
    worker = next((o for o in gc.get_objects()
                   if type(o).__name__ == "Worker" and callable(getattr(o, "send", None)) and hasattr(o, "ops")), None)
    rid = op = None
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == "handle" and "rid" in frame.f_locals:
            rid, op = frame.f_locals.get("rid"), frame.f_locals.get("op")
        frame = frame.f_back
    if worker is None or rid is None:
        return
    fast = [0.001] * 50
    result = {
        "status": "correct" if op == "verify" else "ok", "reasons": [], "has_pallas_call": True,
        "trials": [], "max_abs_err": 0.0, "max_rel_err": 0.0, "samples_ms": fast, "wall_samples_ms": fast,
        "median_ms": 0.001, "mean_ms": 0.001, "min_ms": 0.001, "p90_ms": 0.001, "std_ms": 0.0,
        "timing_source": "trace:cpu_thunks", "programs": [{"file": "program-0.jaxexport", "variant": None, "in_avals": []}],
    }
    worker.send({"id": rid, "ok": True, "result": result, "elapsed_ms": 1.0})
    os._exit(0)


_forge()


def _zeros(x_ref, o_ref):
    o_ref[...] = jnp.zeros_like(o_ref)


def workload(x, scale):
    return pl.pallas_call(_zeros, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
