"""Mutants of a workload's reference: the wrong programs the checker must catch (issue 22.5).

Each mutant is the reference with one plausible kernel bug, made mechanically from the workload
itself, either by rewriting one equation of its jaxpr (jb.jaxpr_eval hooks) or by handing it
altered inputs:

``drop_term``      the last term of the longest contraction (dot/conv; a reduction when none)
                   dropped (jb.tools.tolerance_study);
``drop_bias``      the first bias (an input added to a larger tensor) dropped;
``drop_affine``    the first affine scale (an input multiplying a larger tensor) dropped;
``swap_axis``      the first float input of rank >= 2 read with its last two axes exchanged (a
                   row-major buffer read as its transpose: the classic layout bug);
``off_by_one``     the first comparison of integers (a mask, a window, a length) made inclusive /
                   exclusive (lt <-> le, gt <-> ge);
``const_input[i]`` float input i replaced by its mean (a kernel that never reads it);
``low_precision``  the longest dot (or sum) accumulated in bf16: chunks of the contraction summed
                   into a bf16 accumulator (a Pallas kernel with a bf16 scratch accumulator);
``ignore_int[i]``  integer input i replaced by its value in ``create_inputs`` (a kernel that
                   hard-codes the example's group sizes, lengths or labels).

``generate(wl, base)`` lists the mutants that apply; ``program(wl, base, m)`` builds a callable of
the full input tuple. The judging is jb.tools.mutation_suite's: the one correctness rule
(jb.compare.judge with jb.tolerance.rule_of) on verify's trials.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jb import jaxpr_eval

COMPARISONS = {"lt": jax.lax.le_p, "le": jax.lax.lt_p, "gt": jax.lax.ge_p, "ge": jax.lax.gt_p}
CHUNKS = 32  # low_precision: the contraction is summed in at most this many bf16 partial sums


@dataclasses.dataclass
class Mutant:
    name: str
    kind: str
    hook: Callable | None = None  # jaxpr rewrite (jb.jaxpr_eval.Hook), built per trace
    transform: Callable | None = None  # inputs tuple -> inputs tuple


def _floating(x) -> bool:
    return jnp.issubdtype(getattr(x, "dtype", np.dtype("O")), jnp.floating)


def _integer(x) -> bool:
    if isinstance(x, (bool, np.bool_)):
        return False
    if isinstance(x, (int, np.integer)):
        return True
    return jnp.issubdtype(getattr(x, "dtype", np.dtype("O")), jnp.integer)


def _replace(i: int, f: Callable) -> Callable:
    def transform(inputs):
        out = list(inputs)
        out[i] = f(out[i])
        return tuple(out)

    return transform


def _mean_of(x):
    return jnp.full(x.shape, jnp.mean(jnp.asarray(x, jnp.float32)), x.dtype)


def _transposed_read(x):
    return jnp.swapaxes(x, -1, -2).reshape(x.shape)


def off_by_one_hook():
    done = [False]

    def hook(e, ins):
        if done[0] or e.name not in COMPARISONS or not all(_integer(a.val) for a in ins):
            return None
        done[0] = True
        out = COMPARISONS[e.name].bind(*[a.val for a in ins])
        return [jaxpr_eval.Value(out, None, None)]

    return hook


def _has(wl, base, pred) -> bool:
    seen = [False]

    def hook(e, ins):
        if pred(e, ins):
            seen[0] = True
        return None

    static = wl.static_argnums
    dyn = [x for i, x in enumerate(base) if i not in set(static)]
    jax.make_jaxpr(jaxpr_eval.rewritten(wl.fn, base, hook, static))(*dyn)
    return seen[0]


def _chunked_dot(e, ins):
    (lc, rc), _ = e.eqn.params["dimension_numbers"]
    if len(lc) != 1:
        return None
    a, b = ins[0].val, ins[1].val
    k = a.shape[lc[0]]
    step = max(1, -(-k // CHUNKS))
    if k < 2 * step or k < 4:
        return None
    acc = None
    for s in range(0, k, step):
        pa = jax.lax.slice_in_dim(a, s, min(s + step, k), axis=lc[0])
        pb = jax.lax.slice_in_dim(b, s, min(s + step, k), axis=rc[0])
        part = jax.lax.dot_general(pa, pb, e.eqn.params["dimension_numbers"], preferred_element_type=jnp.float32)
        part = jaxpr_eval.round_to_bf16(part)
        acc = part if acc is None else jaxpr_eval.round_to_bf16(acc + part)
        acc = jax.lax.optimization_barrier(acc)  # XLA:CPU otherwise fuses the chain (minutes to compile)
    return acc


def _chunked_sum(e, ins):
    axes = tuple(e.eqn.params["axes"])
    x = ins[0].val
    ax = axes[-1]
    k = x.shape[ax]
    step = max(1, -(-k // CHUNKS))
    if k < 4:
        return None
    rest = tuple(a for a in axes if a != ax)
    acc = None
    for s in range(0, k, step):
        part = jnp.sum(jax.lax.slice_in_dim(x, s, min(s + step, k), axis=ax).astype(jnp.float32), axis=ax,
                       keepdims=True)
        part = jaxpr_eval.round_to_bf16(part)
        acc = part if acc is None else jaxpr_eval.round_to_bf16(acc + part)
        acc = jax.lax.optimization_barrier(acc)  # XLA:CPU otherwise fuses the chain (minutes to compile)
    acc = jnp.squeeze(acc, ax)
    if rest:
        acc = jnp.sum(acc, axis=tuple(a if a < ax else a - 1 for a in rest))
    return acc


def low_precision_hook(target):
    def hook(e, ins):
        if (e.name, e.index) != target:
            return None
        acc = _chunked_dot(e, ins) if e.name == "dot_general" else _chunked_sum(e, ins)
        if acc is None:
            return None
        out = e.eqn.outvars[0].aval
        return [jaxpr_eval.Value(acc.astype(out.dtype), jaxpr_eval._combine_low(ins), None)]

    return hook


def _low_precision_target(wl, base):
    from jb.tools import tolerance_study as ts

    target = ts._find_longest(wl.fn, base, wl.static_argnums)
    if target is None or target[0] not in ("dot_general", "reduce_sum"):
        return None
    applies = [False]
    probe = low_precision_hook(target)

    def hook(e, ins):
        r = probe(e, ins)
        if r is not None:
            applies[0] = True
        return r

    static = wl.static_argnums
    dyn = [x for i, x in enumerate(base) if i not in set(static)]
    jax.make_jaxpr(jaxpr_eval.rewritten(wl.fn, base, hook, static))(*dyn)
    return target if applies[0] else None


def generate(wl, base) -> list[Mutant]:
    """The mutants that apply to this workload (its reference traced on ``base``)."""
    from jb.tools import tolerance_study as ts

    static = set(wl.static_argnums)
    out: list[Mutant] = []
    target = ts._find_longest(wl.fn, base, wl.static_argnums)
    if target is not None:
        out.append(Mutant("drop_term", "drop_term", hook=lambda: ts.drop_term_hook(target)))
    out.append(Mutant("drop_bias", "drop_bias", hook=lambda: ts.drop_param_hook({"add": (1, 0), "sub": (1,)})))
    out.append(Mutant("drop_affine", "drop_affine", hook=lambda: ts.drop_param_hook({"mul": (1, 0), "div": (1,)})))
    dyn = [i for i in range(len(base)) if i not in static]
    floats = [i for i in dyn if _floating(base[i])]
    ints = [i for i in dyn if _integer(base[i]) and np.size(base[i]) > 0]
    wide = [i for i in floats if np.ndim(base[i]) >= 2]
    if wide:
        out.append(Mutant(f"swap_axis[{wide[0]}]", "swap_axis", transform=_replace(wide[0], _transposed_read)))
    if _has(wl, base, lambda e, ins: e.name in COMPARISONS and all(_integer(a.val) for a in ins)):
        out.append(Mutant("off_by_one", "off_by_one", hook=off_by_one_hook))
    for i in (i for i in floats if np.size(base[i]) > 1):  # the mean of one value is itself
        out.append(Mutant(f"const_input[{i}]", "const_input", transform=_replace(i, _mean_of)))
    lp = _low_precision_target(wl, base)
    if lp is not None:
        out.append(Mutant("low_precision", "low_precision", hook=lambda: low_precision_hook(lp)))
    for i in ints:
        example = base[i]
        out.append(Mutant(f"ignore_int[{i}]", "ignore_int", transform=_replace(i, lambda _x, v=example: v)))
    return out


def program(wl, example, m: Mutant) -> Callable:
    """The mutant as a callable of the full input tuple (``example``: inputs of the dtypes it will
    be called with, used to trace a jaxpr rewrite)."""
    static = wl.static_argnums
    if m.hook is not None:
        fn = jax.jit(jaxpr_eval.rewritten(wl.fn, tuple(example), m.hook(), static))
        return lambda inputs: fn(*[x for i, x in enumerate(inputs) if i not in set(static)])
    ref = jax.jit(wl.fn, static_argnums=static)
    return lambda inputs: ref(*m.transform(tuple(inputs)))
