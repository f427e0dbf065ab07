# target: 12p_RMSNorm
# expect: rejected
# exploit: harness monkey-patch - jax.block_until_ready and jax.Array.block_until_ready become no-ops,
#          so timing stops before the device finishes; the kernel is correct
import jax
import jax.numpy as jnp
from jax._src import array as _array
from jax.experimental import pallas as pl

jax.block_until_ready = lambda x: x
_array.ArrayImpl.block_until_ready = lambda self: self


def _kernel(x_ref, s_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)
    o_ref[...] = (y * s_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


def _rmsnorm(x, scale):
    b, s, d = x.shape
    out = pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((b * s, d), x.dtype))(
        x.reshape(b * s, d), scale.reshape(1, d))
    return out.reshape(b, s, d)


def workload(x, scale):
    return _rmsnorm(x, scale)
