# target: 12p_RMSNorm
# expect: correct
# exploit: two programs - inspects the stack when it is traced: under the profile op it returns a
#          program that only copies its input (no normalization work), anywhere else the honest
#          RMSNorm kernel, so verification passes and the timing is of a different, cheaper program
import sys

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _profiled() -> bool:
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_filename.replace("\\", "/").endswith("ops/profile.py"):
            return True
        frame = frame.f_back
    return False


def _kernel(x_ref, s_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)
    o_ref[...] = (y * s_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


def _copy(x_ref, s_ref, o_ref):
    o_ref[...] = x_ref[...]


def workload(x, scale):
    b, s, d = x.shape
    body = _copy if _profiled() else _kernel
    out = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((b * s, d), x.dtype))(
        x.reshape(b * s, d), scale.reshape(1, d))
    return out.reshape(b, s, d)
