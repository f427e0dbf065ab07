"""Inspection of an exported program (``jax.export``) before the judge runs it.

The judge never imports candidate code: it gets serialized StableHLO programs made by the untrusted
export stage (jb.ops.export) and must decide, from the artifact alone, that each one is safe and
fair to run. :func:`inspect` walks the module with JAX's MLIR bindings (every operation of every
region, so names hidden in strings or attributes do not matter) and reports, as human-readable
reasons:

* the inputs differ from the trusted workload's (pytree structure, shapes, dtypes; computed by the
  judge with ``jax.eval_shape`` of the workload at the same shapes). Outputs that differ are only
  noted: the comparison with the reference makes such a program ``incorrect``;
* the platforms do not include the backend; more than one device; shape polymorphism;
* effects (ordered or unordered): JAX records host callbacks and other side effects there;
* host transfers: ``infeed``/``outfeed``/``send``/``recv`` operations;
* custom calls outside :data:`ALLOWED_CUSTOM_CALLS` (per platform), any target naming a Python
  callback; a function declared without a body (an external symbol);
* an operation of a dialect a plain JAX program does not produce;
* large embedded constants: a non-splat ``stablehlo.constant`` above :data:`MAX_CONSTANT_BYTES`,
  one of at least :data:`MIN_CONSTANT_ELEMENTS` elements as big as an input or output leaf (the
  rule of jb.ops.common.constant_reasons: baked-in data), or all non-splat constants together
  above :data:`MAX_TOTAL_CONSTANT_BYTES` or as big as an input or output leaf (baked-in data split
  into small pieces).

It also reports what the artifact shows about Pallas: Mosaic (TPU), Triton / Mosaic GPU (GPU)
custom calls are the kernel itself. On CPU an interpret-mode ``pallas_call`` lowers to plain HLO and
leaves no trace, so the export stage's claim is all there is (``pallas_evidence: "claimed"``).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np

# Custom-call targets a program may contain, per export platform: the part of jax's own list of
# targets with a compatibility guarantee (read from the installed jax) that belongs to the platform
# (native LAPACK/BLAS kernels on CPU, cuSOLVER/cuSPARSE/threefry on CUDA, XLA's TPU linear algebra;
# none of them reaches Python), the sharding/shape markers, plus the Pallas kernels' own targets.
PALLAS_TARGETS = {
    "tpu": ("tpu_custom_call",),
    "cuda": ("__gpu$xla.gpu.triton", "triton_kernel_call_ffi", "mosaic_gpu_v2", "mosaic_gpu"),
    "rocm": ("__gpu$xla.gpu.triton", "triton_kernel_call_ffi"),
    "cpu": (),
}
PLATFORM_PREFIXES = {
    "cpu": ("lapack_", "blas_", "ducc_", "dynamic_ducc_"),
    "cuda": ("cu_", "cublas_", "cusolver_", "cusparse_"),
    "rocm": ("hip_", "hipsolver_", "hipsparse_"),
    "tpu": (),
}
# Vendor-library calls XLA itself implements, by name prefix (cuDNN fused attention/norms).
LIBRARY_PREFIXES = {"cuda": ("__cudnn$",), "rocm": (), "cpu": (), "tpu": ()}
COMMON_TARGETS = ("Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "shape_assertion", "ApproxTopK",
                  "AllocateBuffer")
# In jax's list but not for a judge: a TensorFlow function call (host code) and memory-kind
# placement (host offloading).
DENIED_TARGETS = ("tf.call_tf_function", "annotate_device_placement")
# Targets never allowed whatever jax's list says: host callbacks (Python objects of the exporting
# process, dangling pointers in the judge) and host transfers.
FORBIDDEN_TARGET = re.compile(r"callback|infeed|outfeed|host|send|recv|py_", re.I)
HOST_TRANSFER_OPS = ("infeed", "outfeed", "send", "recv")
ALLOWED_DIALECTS = ("builtin", "func", "stablehlo", "chlo", "mhlo", "sdy", "vhlo", "shape")

MIN_CONSTANT_ELEMENTS = 4096  # as jb.ops.common.constant_reasons
MAX_CONSTANT_BYTES = 64 * 1024
MAX_TOTAL_CONSTANT_BYTES = 1024 * 1024


def stable_targets() -> frozenset[str]:
    try:
        from jax._src.export import _export

        return frozenset(getattr(_export, "_CUSTOM_CALL_TARGETS_GUARANTEED_STABLE", ()))
    except ImportError:  # pragma: no cover - jax layout changed; nothing but the explicit lists
        return frozenset()


def allowed_targets(platform: str) -> frozenset[str]:
    prefixes = PLATFORM_PREFIXES.get(platform, ())

    def belongs(t: str) -> bool:
        return (t in COMMON_TARGETS or t.startswith("stablehlo.") or t.startswith(prefixes)
                or (platform == "tpu" and t[:1].isupper()))

    stable = {t for t in stable_targets() if belongs(t) and t not in DENIED_TARGETS and not FORBIDDEN_TARGET.search(t)}
    return frozenset(stable | set(PALLAS_TARGETS.get(platform, ())))


def target_allowed(target: str, platform: str, allowed: frozenset[str] | None = None) -> bool:
    if FORBIDDEN_TARGET.search(target) or target in DENIED_TARGETS:
        return False
    allowed = allowed_targets(platform) if allowed is None else allowed
    return target in allowed or target.startswith(LIBRARY_PREFIXES.get(platform, ()) or ("\x00",))


def export_platform(backend: str) -> str:
    """The jax.export platform name of a jb backend (gpu -> cuda/rocm)."""
    if backend != "gpu":
        return backend
    try:
        import jax

        return jax.export.default_export_platform()
    except Exception:  # noqa: BLE001
        return "cuda"


@dataclasses.dataclass
class Signature:
    """What the judge expects of a program: flat (shape, dtype) lists and pytree structures."""

    in_avals: list[tuple[tuple[int, ...], str]]
    out_avals: list[tuple[tuple[int, ...], str]]
    in_tree: Any
    out_tree: Any

    def describe_in(self) -> str:
        return describe_avals(self.in_avals)


def describe_avals(avals) -> str:
    return "(" + ", ".join(f"{dtype}{list(shape)}" for shape, dtype in avals) + ")"


def avals_of(seq) -> list[tuple[tuple[int, ...], str]]:
    return [(tuple(int(d) for d in a.shape), str(np.dtype(a.dtype))) for a in seq]


@dataclasses.dataclass
class Inspection:
    reasons: list[str]
    custom_calls: list[str]
    constants: list[dict]  # largest first: {shape, dtype, size, bytes, splat}
    has_pallas_call: bool  # Pallas custom calls seen in the artifact
    ops: int

    @property
    def ok(self) -> bool:
        return not self.reasons


def _dialect(name: str) -> str:
    return name.split(".", 1)[0] if "." in name else "builtin"


_BITS = re.compile(r"(\d+)")


def _element_bits(element_type: str) -> int:
    if element_type.startswith("complex<"):
        return 2 * _element_bits(element_type[len("complex<"):-1])
    if element_type == "index":
        return 64
    m = _BITS.search(element_type)
    return int(m.group(1)) if m else 64


def _walk(op):
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                child = child.operation
                yield child
                yield from _walk(child)


def _parse(exported):
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib.mlir import ir

    ctx = jmlir.make_ir_context()
    with ctx:
        module = ir.Module.parse(exported.mlir_module())
    return ctx, module


def _constant(op, ir) -> dict:
    rtype = ir.RankedTensorType(op.results[0].type)
    shape = [int(d) for d in rtype.shape]
    size = int(np.prod(shape)) if shape else 1
    etype = str(rtype.element_type)
    value = op.attributes["value"] if "value" in op.attributes else None
    splat = False
    if value is not None:
        try:
            splat = bool(ir.DenseElementsAttr(value).is_splat)
        except (ValueError, TypeError):  # dense_resource and other encodings: data, not a splat
            splat = False
    return {"shape": shape, "dtype": etype, "size": size, "bytes": (size * _element_bits(etype) + 7) // 8, "splat": splat}


def scan_module(exported, platform: str) -> Inspection:
    """Walk every operation of the exported module; reasons for what must not be there."""
    from jax._src.lib.mlir import ir

    reasons: list[str] = []
    targets: list[str] = []
    constants: list[dict] = []
    transfers: set[str] = set()
    dialects: set[str] = set()
    external: list[str] = []
    count = 0
    allowed = allowed_targets(platform)
    try:
        ctx, module = _parse(exported)
    except Exception as exc:  # noqa: BLE001 - an unparseable module is rejected, never run
        return Inspection([f"the program's StableHLO module cannot be parsed: {exc}"[:500]], [], [], False, 0)
    with ctx:
        for op in _walk(module.operation):
            count += 1
            name = op.name
            dialect = _dialect(name)
            if dialect not in ALLOWED_DIALECTS:
                dialects.add(name)
            short = name.split(".", 1)[-1]
            if short in HOST_TRANSFER_OPS:
                transfers.add(name)
            if short == "custom_call":
                attr = op.attributes["call_target_name"] if "call_target_name" in op.attributes else None
                targets.append(ir.StringAttr(attr).value if attr is not None else "<unnamed>")
            elif name == "stablehlo.constant":
                try:
                    constants.append(_constant(op, ir))
                except Exception as exc:  # noqa: BLE001
                    reasons.append(f"a constant of unknown size: {exc}"[:300])
            elif name == "func.func" and not op.regions[0].blocks:
                sym = op.attributes["sym_name"] if "sym_name" in op.attributes else None
                external.append(ir.StringAttr(sym).value if sym is not None else "?")
    bad = sorted({t for t in targets if not target_allowed(t, platform, allowed)})
    if any(FORBIDDEN_TARGET.search(t) for t in bad):
        reasons.append("host callbacks in the program: custom calls " + ", ".join(t for t in bad if FORBIDDEN_TARGET.search(t)))
    others = [t for t in bad if not FORBIDDEN_TARGET.search(t)]
    if others:
        reasons.append(f"custom calls outside the {platform} allow-list: {', '.join(others)}")
    if transfers:
        reasons.append(f"host transfers in the program: {', '.join(sorted(transfers))}")
    if dialects:
        reasons.append(f"operations of unexpected dialects: {', '.join(sorted(dialects)[:8])}")
    if external:
        reasons.append(f"functions declared without a body (external symbols): {', '.join(external[:8])}")
    pallas = sorted({t for t in targets if t in PALLAS_TARGETS.get(platform, ())})
    constants.sort(key=lambda c: -c["size"])
    return Inspection(reasons, sorted(set(targets)), constants, bool(pallas), count)


def constant_reasons(constants: list[dict], expected: Signature) -> tuple[list[str], list[str]]:
    """(notes, rejections) for the non-splat constants of a program (splats are not data)."""
    sized = [(f"input {i}", int(np.prod(s)) if s else 1) for i, (s, _) in enumerate(expected.in_avals)]
    sized += [(f"output {i}", int(np.prod(s)) if s else 1) for i, (s, _) in enumerate(expected.out_avals)]
    sized = [(n, s) for n, s in sized if s >= MIN_CONSTANT_ELEMENTS]
    notes, rejects = [], []
    total = 0
    for c in constants:
        if c["splat"]:
            continue
        total += c["bytes"]
        text = f"embedded constant {c['dtype']}{c['shape']} ({c['bytes']} bytes)"
        if c["bytes"] > MAX_CONSTANT_BYTES:
            rejects.append(f"{text}: larger than {MAX_CONSTANT_BYTES} bytes")
            continue
        if c["size"] < MIN_CONSTANT_ELEMENTS:
            continue
        match = [(n, s) for n, s in sized if c["size"] >= s]
        if match:
            n, s = min(match, key=lambda m: m[1])
            rejects.append(f"{text}: as big as {n} ({s} elements)")
        else:
            notes.append(text)
    if total > MAX_TOTAL_CONSTANT_BYTES:
        rejects.append(f"embedded constants total {total} bytes (more than {MAX_TOTAL_CONSTANT_BYTES})")
    elements = sum(c["size"] for c in constants if not c["splat"])
    match = [(n, s) for n, s in sized if elements >= s]
    if match and not rejects:
        n, s = min(match, key=lambda m: m[1])
        rejects.append(f"embedded constants total {elements} elements: as big as {n} ({s} elements)")
    return notes, rejects


def signature_reasons(exported, expected: Signature) -> tuple[list[str], list[str]]:
    """(rejections, notes). Inputs must be the workload's exactly: the export stage was given them,
    a difference means a forged artifact. Outputs that differ are what an honest but wrong kernel
    produces: noted here, and the comparison with the reference makes the result ``incorrect`` (as
    for a candidate judged in-process)."""
    reasons, notes = [], []
    got_in, got_out = avals_of(exported.in_avals), avals_of(exported.out_avals)
    if exported.in_tree != expected.in_tree:
        reasons.append(f"input structure {exported.in_tree} differs from the workload's {expected.in_tree}")
    if got_in != expected.in_avals:
        reasons.append(f"inputs {describe_avals(got_in)} differ from the workload's {describe_avals(expected.in_avals)}")
    if exported.out_tree != expected.out_tree:
        notes.append(f"output structure {exported.out_tree} differs from the workload's {expected.out_tree}")
    if got_out != expected.out_avals:
        notes.append(f"outputs {describe_avals(got_out)} differ from the workload's {describe_avals(expected.out_avals)}")
    return reasons, notes


def header_reasons(exported, platform: str) -> list[str]:
    reasons = []
    if platform not in tuple(exported.platforms):
        reasons.append(f"exported for platforms {list(exported.platforms)}, not {platform}")
    if exported.nr_devices != 1:
        reasons.append(f"exported for {exported.nr_devices} devices (expected 1)")
    if exported.ordered_effects or exported.unordered_effects:
        effects = [str(e) for e in (*exported.ordered_effects, *exported.unordered_effects)]
        reasons.append(f"the program has effects (host callbacks or I/O): {', '.join(effects)}")
    if exported.uses_global_constants:
        reasons.append("the program uses shape polymorphism or multi-platform lowering (global constants)")
    return reasons


def inspect(exported, expected: Signature, platform: str) -> tuple[Inspection, list[str]]:
    """(module scan, notes); ``scan.reasons`` gets every header, signature and constant rejection."""
    scan = scan_module(exported, platform)
    sig_rejects, sig_notes = signature_reasons(exported, expected)
    notes, const_rejects = constant_reasons(scan.constants, expected)
    scan.reasons = header_reasons(exported, platform) + sig_rejects + scan.reasons + const_rejects
    return scan, sig_notes + notes


# ----------------------------------------------------------------------------------------------
# The workload's shapes (trusted side: computed from the workload, never from the candidate)


@dataclasses.dataclass
class Shape:
    """One input-shape signature of a workload: the scale's own (variant None) or a variant's."""

    variant: dict | None
    wl: Any  # jb.workload.Workload with the variant's CONFIG applied
    args: tuple  # jax.ShapeDtypeStruct pytrees at dynamic positions, the static values elsewhere

    @property
    def static(self) -> dict[int, Any]:
        return {i: self.args[i] for i in self.wl.static_argnums if i < len(self.args)}

    def dynamic(self) -> tuple:
        return tuple(a for i, a in enumerate(self.args) if i not in self.wl.static_argnums)


def variant_overrides(wl) -> list[dict]:
    """The workload's declared shape variants (``Workload.variants()``; [] where not available)."""
    get = getattr(wl, "variants", None)
    if not callable(get):
        module_get = getattr(wl.module, "variants", None)
        if not callable(module_get):
            return []
        out = module_get(dict(wl.config))
    else:
        out = get()
    return [dict(v) for v in (out or []) if isinstance(v, dict) and v]


def with_variant(wl, override: dict | None):
    """A fresh copy of ``wl`` (same file, same scale) with ``override`` applied to CONFIG."""
    if not override:
        return wl
    from jb.workload import load_workload

    vwl = load_workload(wl.path, wl.scale)
    unknown = set(override) - set(vwl.config)
    if unknown:
        raise ValueError(f"variant {override!r}: unknown CONFIG keys {sorted(unknown)}")
    vwl.module.CONFIG.update(override)
    return vwl


def abstract_args(wl) -> tuple:
    """The workload's inputs as ShapeDtypeStructs (static arguments as their values), cheaply.

    ``create_inputs`` is evaluated abstractly (``jax.eval_shape``) where it can be; a workload whose
    input builder needs concrete values is run for real.
    """
    import jax

    static = set(wl.static_argnums)
    captured: dict = {}

    def make():
        ins = wl.create_inputs()
        captured["static"] = {i: ins[i] for i in static if i < len(ins)}
        captured["n"] = len(ins)
        return tuple(x for i, x in enumerate(ins) if i not in static)

    try:
        dyn = jax.eval_shape(make)
        statics = captured["static"]
        if any(isinstance(v, jax.core.Tracer) for v in jax.tree_util.tree_leaves(statics)):
            raise TypeError("a static argument depends on traced values")
    except Exception:  # noqa: BLE001 - fall back to concrete inputs
        ins = wl.create_inputs()
        statics = {i: ins[i] for i in static if i < len(ins)}
        dyn = tuple(jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), x)
                    for i, x in enumerate(ins) if i not in static)
        captured["n"] = len(ins)
    dyn = iter(dyn)
    return tuple(statics[i] if i in statics else next(dyn) for i in range(captured["n"]))


def shapes(wl, extra: list | tuple = ()) -> list[Shape]:
    """The scale's shapes then every declared variant's, then those of ``extra`` overrides (the
    ``variants`` a request names, e.g. held-out shapes given to verify) not declared already."""
    out = [Shape(None, wl, abstract_args(wl))]
    overrides = variant_overrides(wl)
    for override in extra or ():
        if not isinstance(override, dict) or not override:
            raise ValueError(f"a variant must be a non-empty object of CONFIG overrides, got {override!r}")
        if override not in overrides:
            overrides.append(dict(override))
    for override in overrides:
        vwl = with_variant(wl, override)
        out.append(Shape(override, vwl, abstract_args(vwl)))
    return out


def expected_signature(shape: Shape) -> Signature:
    """The signature jax.export gives ``jax.jit(workload, static_argnums)`` at ``shape``."""
    import jax

    wl = shape.wl
    static = wl.static_argnums
    dyn = shape.dynamic()

    def call(*dyn_args):
        it = iter(dyn_args)
        return wl.fn(*[shape.args[i] if i in static else next(it) for i in range(len(shape.args))])

    out = jax.eval_shape(call, *dyn)
    in_leaves, in_tree = jax.tree_util.tree_flatten((dyn, {}))
    out_leaves, out_tree = jax.tree_util.tree_flatten(out)
    return Signature(avals_of(in_leaves), avals_of(out_leaves), in_tree, out_tree)


def input_key(dyn_inputs) -> list[tuple[tuple[int, ...], str]]:
    import jax

    return avals_of(jax.tree_util.tree_leaves(dyn_inputs))
