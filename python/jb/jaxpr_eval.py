"""Re-evaluate a program's jaxpr equation by equation, with a hook that may change each equation.

Used to evaluate the same program under another numeric policy (``bf16_rounding``: every
floating-point intermediate computed from bfloat16 data is rounded to bfloat16, the way a program
written in bfloat16 end to end stores its intermediates) and, in the tolerance study, to make
wrong variants of a workload (one reduction term dropped, a bias or an affine parameter dropped).

Call-like equations (``pjit``, ``custom_jvp_call``, ``custom_vjp_call``, ``closed_call``,
``remat``) are inlined, so the hook sees the equations inside ``jnp``/``jax.nn`` helpers; loops
and conditionals (``scan``, ``while``, ``cond``) and kernels (``pallas_call``) are bound as they
are. The result is a plain function of the same inputs, meant to be wrapped in ``jax.jit``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

# Equations whose body is a sub-jaxpr evaluated once with the equation's operands (inlined).
_CALL_PARAMS = {
    "pjit": "jaxpr",
    "jit": "jaxpr",
    "closed_call": "call_jaxpr",
    "core_call": "call_jaxpr",
    "custom_jvp_call": "call_jaxpr",
    "custom_vjp_call": "call_jaxpr",
    "custom_vjp_call_jaxpr": "fun_jaxpr",
    "remat": "jaxpr",
    "checkpoint": "jaxpr",
    "custom_lin": None,
}


@dataclasses.dataclass
class Value:
    """An intermediate: its array and where it came from."""

    val: Any
    low: bool | None  # computed from bfloat16/float16 data only (None: from constants only)
    param: int | None  # the input leaf it is a reshaped/broadcast/cast copy of, if any


# Equations through which a value stays a copy of one input leaf (a parameter: bias, scale).
SHAPE_OPS = {
    "broadcast_in_dim", "reshape", "convert_element_type", "squeeze", "expand_dims", "transpose", "copy",
    "copy_p",
}

Hook = Callable[["Eqn", list], "list | None"]


@dataclasses.dataclass
class Eqn:
    """What a hook sees: the equation, its operands (Values) and a running index per primitive."""

    eqn: Any
    args: list[Value]
    index: int  # how many equations of this primitive came before (in inlined order)
    n_inputs_elems: list[int]  # element count of every input leaf (for "smaller than the output")

    @property
    def name(self) -> str:
        return self.eqn.primitive.name


def _bind(eqn, vals: list):
    params = eqn.primitive.get_bind_params(eqn.params)
    if isinstance(params, tuple):  # older jax: (subfuns, params)
        subfuns, params = params
        vals = [*subfuns, *vals]
    with eqn.ctx.manager:
        out = eqn.primitive.bind(*vals, **params)
    return list(out) if eqn.primitive.multiple_results else [out]


def _closed(sub):
    from jb import jaxcompat

    return jaxcompat.jaxpr_parts(sub) or (sub, ())


def _is_low(dtype) -> bool:
    return jnp.dtype(dtype) in (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))


def _combine_low(args: list[Value]) -> bool | None:
    flags = [a.low for a in args if a.low is not None and _floating(a.val)]
    if not flags:
        return None
    return all(flags)


def _floating(x) -> bool:
    dtype = getattr(x, "dtype", None)
    return dtype is not None and jnp.issubdtype(dtype, jnp.floating)


def evaluate(closed, args: list[Value], hook: Hook | None, counters: dict, sizes: list[int]) -> list[Value]:
    from jax._src import core

    jaxpr, consts = _closed(closed)
    env: dict = {}

    def read(v) -> Value:
        if isinstance(v, core.Literal):
            return Value(v.val, None, None)
        return env[v]

    for v, c in zip(jaxpr.constvars, consts):
        env[v] = Value(c, None, None)
    for v, a in zip(jaxpr.invars, args):
        env[v] = a
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        name = eqn.primitive.name
        key = _CALL_PARAMS.get(name, "")
        sub = eqn.params.get(key) if key else None
        if sub is not None:
            outs = evaluate(sub, ins, hook, counters, sizes)
        else:
            index = counters.get(name, 0)
            counters[name] = index + 1
            replaced = hook(Eqn(eqn, ins, index, sizes), ins) if hook is not None else None
            if replaced is None:
                vals = _bind(eqn, [a.val for a in ins])
                low = _combine_low(ins)
                param = ins[0].param if name in SHAPE_OPS and ins else None
                outs = [Value(val, low, param) for val in vals]
            else:
                outs = replaced
        for v, o in zip(eqn.outvars, outs):
            if not isinstance(v, core.DropVar):
                env[v] = o
    return [read(v) for v in jaxpr.outvars]


def rewritten(fn: Callable, example_inputs: tuple, hook: Hook | None, static_argnums=()) -> Callable:
    """``fn`` re-evaluated through its jaxpr with ``hook``; a function of the dynamic inputs' leaves
    (static arguments bound), returning the same pytree as ``fn``."""
    static = set(static_argnums)
    dyn_pos = [i for i in range(len(example_inputs)) if i not in static]

    def call(*dyn):
        full = list(example_inputs)
        for i, d in zip(dyn_pos, dyn):
            full[i] = d
        return fn(*full)

    dyn_example = tuple(example_inputs[i] for i in dyn_pos)
    closed, out_shape = jax.make_jaxpr(call, return_shape=True)(*dyn_example)
    out_tree = jax.tree_util.tree_structure(out_shape)
    in_leaves = jax.tree_util.tree_leaves(dyn_example)
    sizes = [int(np.prod(getattr(x, "shape", ()) or (1,))) for x in in_leaves]
    low_in = [(_is_low(x.dtype) if _floating(x) else None) for x in in_leaves]

    def run(*dyn):
        leaves = jax.tree_util.tree_leaves(dyn)
        args = [Value(x, low, i) for i, (x, low) in enumerate(zip(leaves, low_in))]
        outs = evaluate(closed, args, hook, {}, sizes)
        return jax.tree_util.tree_unflatten(out_tree, [o.val for o in outs])

    return run


def round_to_bf16(x):
    """float32 ``x`` rounded to the nearest bfloat16 (ties to even), kept in float32.

    Done on the bits: XLA may drop an f32 -> bf16 -> f32 convert pair as "excess precision"
    (xla_allow_excess_precision), which would silently turn the emulation off."""
    if x.dtype != jnp.float32:
        return x.astype(jnp.bfloat16).astype(x.dtype)
    bits = jax.lax.bitcast_convert_type(x, jnp.uint32)
    lsb = (bits >> 16) & jnp.uint32(1)
    rounded = (bits + jnp.uint32(0x7FFF) + lsb) & jnp.uint32(0xFFFF0000)
    out = jax.lax.bitcast_convert_type(rounded, jnp.float32)
    return jnp.where(jnp.isnan(x), x, out)


def bf16_rounding(e: Eqn, ins: list[Value]):
    """Hook: every float32 result computed from bfloat16 data only is rounded to bfloat16 (what a
    program written in bfloat16 end to end stores; reductions and dots still accumulate inside the
    operation in the precision the program asked for)."""
    vals = _bind(e.eqn, [a.val for a in ins])
    low = _combine_low(ins)
    param = ins[0].param if e.name in SHAPE_OPS and ins else None
    outs = []
    for val in vals:
        if low and _floating(val) and not _is_low(val.dtype):
            val = round_to_bf16(val)
        outs.append(Value(val, low, param))
    return outs
