# target: 12p_RMSNorm
# expect: compile_error
# exploit: Pallas API misuse - a BlockSpec whose rank does not match the operand (error_class
#          "pallas_api")
import jax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def workload(x, scale):
    b, s, d = x.shape
    return pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(b,),
        in_specs=[pl.BlockSpec((s, d), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((1, s, d), lambda i: (i, 0, 0)),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(x)
