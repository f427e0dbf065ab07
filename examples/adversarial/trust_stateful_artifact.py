# target: 12p_RMSNorm
# expect: rejected
# exploit: a stateful, hand-serialized artifact - an honest RMSNorm kernel whose module replaces
#          `jax.export.Exported.serialize` at import. Every program it writes is the honest one
#          with two things spliced into its StableHLO text: `mhlo.xla.rng_get_and_update_state`
#          (a counter XLA keeps per executable, +1 per call) that switches on an error from the
#          40th call, and a 256 KiB `mhlo.constant` (not a `stablehlo.constant`, so a scan that
#          counts only those sees no data). jax's own serializer would refuse both (they have no
#          portable form), so the module is written as raw MLIR bytecode and put in jax's
#          flatbuffer. Before issue 20.2 `jax.export.deserialize` read it, the scan found nothing,
#          and it was verified `correct` (trust `artifact`) while what was timed later computed
#          something else. Now the judge parses only a StableHLO portable artifact: rejected,
#          "not written by jax's serializer" (and, were its producer forged, for its unversioned
#          operations; were it portable, for operations outside the allow-list).
import dataclasses
import io
import re

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

EPSILON = 1e-5
_honest_serialize = jax.export.Exported.serialize
# XLA's RNG counter starts at 117515157 in a fresh process and goes up by one per call of any
# program that reads it: honest for the first 40 calls (verify's), wrong afterwards (timed).
_SWITCH_AT = 117515157 + 40
_RETURN = re.compile(r"^(\s*)return (%[\w#]+) : (tensor<[^>]+>)(.*)$", re.M)


def _forge(text: str) -> str:
    """The honest module with the counter and the big constant spliced before main's return."""
    main = text.index("func.func public @main")
    m = _RETURN.search(text, main)
    indent, value, ttype = m.group(1), m.group(2), m.group(3)
    dtype = ttype[len("tensor<"):-1].split("x")[-1]
    n = 65536
    data = np.zeros(n, np.float32)
    data[1] = 1.0
    blob = "0x" + data.tobytes().hex().upper()
    lines = [
        '%jb_state = "mhlo.xla.rng_get_and_update_state"() {delta = 1 : i64} : () -> tensor<2xui64>',
        '%jb_s0 = "stablehlo.slice"(%jb_state) {start_indices = array<i64: 0>, limit_indices = array<i64: 1>, '
        'strides = array<i64: 1>} : (tensor<2xui64>) -> tensor<1xui64>',
        "%jb_s = stablehlo.reshape %jb_s0 : (tensor<1xui64>) -> tensor<ui64>",
        f"%jb_20 = stablehlo.constant dense<{_SWITCH_AT}> : tensor<ui64>",
        "%jb_ge = stablehlo.compare GE, %jb_s, %jb_20, UNSIGNED : (tensor<ui64>, tensor<ui64>) -> tensor<i1>",
        f'%jb_big = "mhlo.constant"() {{value = dense<"{blob}"> : tensor<{n}xf32>}} : () -> tensor<{n}xf32>',
        '%jb_b0 = "stablehlo.slice"(%jb_big) {start_indices = array<i64: 1>, limit_indices = array<i64: 2>, '
        f"strides = array<i64: 1>}} : (tensor<{n}xf32>) -> tensor<1xf32>",
        "%jb_b = stablehlo.reshape %jb_b0 : (tensor<1xf32>) -> tensor<f32>",
        "%jb_z = stablehlo.constant dense<0.0> : tensor<f32>",
        "%jb_d = stablehlo.select %jb_ge, %jb_b, %jb_z : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>",
        f"%jb_dc = stablehlo.convert %jb_d : (tensor<f32>) -> tensor<{dtype}>",
        f"%jb_bc = stablehlo.broadcast_in_dim %jb_dc, dims = [] : (tensor<{dtype}>) -> {ttype}",
        f"%jb_out = stablehlo.add {value}, %jb_bc : {ttype}",
        f"return %jb_out : {ttype}",
    ]
    spliced = "\n".join(indent + line for line in lines)
    return text[:m.start()] + spliced + text[m.end():]


def _serialize(self, *args, **kwargs):
    try:
        from jax._src.interpreters import mlir as jmlir
        from jax._src.lib.mlir import ir

        with jmlir.make_ir_context():
            module = ir.Module.parse(_forge(self.mlir_module()))
            out = io.BytesIO()
            module.operation.write_bytecode(out)
        forged = dataclasses.replace(self, mlir_module_serialized=out.getvalue())
        return _honest_serialize(forged, *args, **kwargs)
    except Exception:  # noqa: BLE001 - never let the attack break the honest path
        return _honest_serialize(self, *args, **kwargs)


jax.export.Exported.serialize = _serialize


def _rmsnorm(x_ref, s_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + EPSILON)
    o_ref[...] = (y * s_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


@jax.jit
def workload(x, scale):
    b, s, d = x.shape
    out = pl.pallas_call(_rmsnorm, out_shape=jax.ShapeDtypeStruct((b * s, d), x.dtype))(
        x.reshape(b * s, d), scale.reshape(1, d)
    )
    return out.reshape(b, s, d)
