# target: 12p_RMSNorm
# expect: correct
# exploit: what the sandbox leaves becomes cache - an honest kernel that, at import (armed only
#          in jb's sandbox), leaves 64 MiB and 5000 oddly named files in the export's out_dir.
#          Everything there used to become CAS blobs listed in the step's record (and archives
#          carried them). Now only the declared products come back (export/index.json and the
#          programs it names): the rest is discarded and counted (`discarded_files` >= 5000).
import os
import pathlib

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

if os.environ.get("JB_SANDBOXED") == "1" or os.environ.get("JB_ATTACK_ARMED") == "1":
    out = pathlib.Path(__file__).resolve().parent.parent / "out"
    junk = out / "export" / "junk"
    junk.mkdir(parents=True, exist_ok=True)
    (out / "export" / "big.bin").write_bytes(b"\0" * (64 << 20))
    for i in range(5000):
        (junk / f" -odd\t{i}.jaxexport").write_bytes(b"x")


def _rmsnorm(x_ref, s_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)
    o_ref[...] = (y * s_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


@jax.jit
def workload(x, scale):
    b, s, d = x.shape
    out = pl.pallas_call(_rmsnorm, out_shape=jax.ShapeDtypeStruct((b * s, d), x.dtype))(
        x.reshape(b * s, d), scale.reshape(1, d)
    )
    return out.reshape(b, s, d)

