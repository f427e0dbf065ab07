"""``describe``: what a workload is at a scale (no implementation involved)."""

from __future__ import annotations

import jax

from jb.ops import common


def run(args: dict) -> dict:
    req = common.Request.from_args(args)
    wl = req.workload()
    inputs = wl.create_inputs()
    statics = wl.static_argnums
    dyn = [a for i, a in enumerate(inputs) if i not in statics]

    def call(*d):
        it = iter(d)
        return wl.fn(*[a if i in statics else next(it) for i, a in enumerate(inputs)])

    out = jax.eval_shape(call, *dyn)
    flops, source = wl.flops(), "get_flops"
    if flops is None:
        cost = common.safe_cost(jax.jit(wl.fn, static_argnums=statics).trace(*inputs).lower().compile())
        flops, source = cost["flops"], ("xla_cost_analysis" if cost["flops"] is not None else None)
    scales = getattr(wl.module, "SCALES", None) or {}
    return {
        "name": wl.name,
        "scale": wl.scale,
        "config": dict(wl.config),
        "meta": wl.meta,
        "inputs": [common.describe_leaf(x) for x in inputs],
        "outputs": [common.describe_leaf(x) for x in jax.tree_util.tree_leaves(out)],
        "output_tree": str(jax.tree_util.tree_structure(out)),
        "flops": float(flops) if flops is not None else None,
        "flops_source": source,
        "tolerance": wl.tolerance,
        "static_argnums": list(statics),
        "scales": sorted(scales),
        "has_get_flops": callable(getattr(wl.module, "get_flops", None)),
    }
