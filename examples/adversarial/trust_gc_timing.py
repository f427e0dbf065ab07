# target: 12p_RMSNorm
# expect: correct
# exploit: a speedup forged where the candidate shares the timer's process - an honest RMSNorm
#          kernel that calls a TPU-only primitive (pltpu.prng_seed), so on CPU it runs only in
#          TPU interpret mode, whose host callbacks cannot be exported: jb must compile, verify
#          and profile it in its own (sandboxed) process. At import it adds a `gc.callbacks`
#          hook; the profile op's `gc.collect()` before the timed rounds calls it, and it walks
#          the stack to the op's `programs` and swaps the candidate's timing list for one that
#          records every time divided by 5000. Its outputs are right, so the verdict (rechecked
#          from its dumped outputs) stays `correct`; before issue 20 `jb eval` reported a
#          speedup of several x (honestly ~0.006x) and `jb agent` counted it correct_faster.
#          Now a time measured where candidate code ran is never a speedup: `speedup_vs_xla`
#          null, `unmeasured` says why, the agent counts it `correct_unmeasured`.
import functools
import gc
import sys

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

EPSILON = 1e-5


class _Shrunk(list):
    """A timing list that records every time 5000x shorter."""

    def append(self, ms):
        super().append(ms / 5000.0)


def _rewrite_timings(phase, info):
    if phase != "start":
        return
    frame = sys._getframe()
    while frame is not None:
        for p in frame.f_locals.get("programs") or ():
            if getattr(p, "role", None) == "impl" and not isinstance(getattr(p, "wall", None), _Shrunk):
                p.wall = _Shrunk(p.wall)
        frame = frame.f_back


gc.callbacks.append(_rewrite_timings)


def _rmsnorm(x_ref, s_ref, o_ref):
    pltpu.prng_seed(0)  # unexportable on CPU: forces the sandboxed path
    x = x_ref[...].astype(jnp.float32)
    y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + EPSILON)
    o_ref[...] = (y * s_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


@functools.partial(jax.jit)
def workload(x, scale):
    b, s, d = x.shape
    out = pl.pallas_call(_rmsnorm, out_shape=jax.ShapeDtypeStruct((b * s, d), x.dtype))(
        x.reshape(b * s, d), scale.reshape(1, d)
    )
    return out.reshape(b, s, d)
