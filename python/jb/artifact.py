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

# ----------------------------------------------------------------------------------------------
# The allow-lists (issue 20.2). A program is accepted only when every operation is named here and
# every custom call's target is listed for the platform; anything else is rejected, so an operation
# jb never reviewed is refused rather than run.

# StableHLO operations of a pure, single-device function: arithmetic, shapes, control flow,
# reductions, linear algebra. Missing on purpose (and named in DENIED_OPS with the reason):
# stateful RNG, tokens and host transfers, collectives, dynamic-shape forms.
STABLEHLO_OPS = frozenset(f"stablehlo.{n}" for n in (
    "abs", "add", "and", "atan2", "batch_norm_grad", "batch_norm_inference", "batch_norm_training",
    "bitcast_convert", "broadcast", "broadcast_in_dim", "case", "cbrt", "ceil", "cholesky", "clamp",
    "compare", "complex", "composite", "concatenate", "constant", "convert", "convolution", "cosine",
    "count_leading_zeros", "custom_call", "divide", "dot", "dot_general", "dynamic_slice",
    "dynamic_update_slice", "einsum", "exponential", "exponential_minus_one", "fft", "floor", "gather",
    "get_dimension_size", "get_tuple_element", "if", "imag", "iota", "is_finite", "log", "log_plus_one",
    "logistic", "map", "maximum", "minimum", "multiply", "negate", "not", "optimization_barrier", "or",
    "pad", "popcnt", "power", "real", "reduce", "reduce_precision", "reduce_window", "remainder",
    "reshape", "return", "reverse", "round_nearest_afz", "round_nearest_even", "rsqrt", "scatter",
    "select", "select_and_scatter", "shift_left", "shift_right_arithmetic", "shift_right_logical", "sign",
    "sine", "slice", "sort", "sqrt", "subtract", "tan", "tanh", "torch_index_select", "transpose",
    "triangular_solve", "tuple", "unary_einsum", "while", "xor",
))
# CHLO's pure elementwise and top-k ops (jax's serializer lowers CHLO to StableHLO; listed for a
# module that keeps them).
CHLO_OPS = frozenset(f"chlo.{n}" for n in (
    "acos", "acosh", "asin", "asinh", "atan", "atanh", "bessel_i1e", "conj", "cosh", "digamma", "erf",
    "erf_inv", "erfc", "is_inf", "is_neg_inf", "is_pos_inf", "lgamma", "next_after", "polygamma", "sinh",
    "square", "tan", "top_k", "zeta", "broadcast_add", "broadcast_subtract", "broadcast_multiply",
    "broadcast_divide", "broadcast_maximum", "broadcast_minimum", "broadcast_compare", "broadcast_select",
    "broadcast_and", "broadcast_or", "broadcast_xor", "broadcast_power", "broadcast_remainder",
    "broadcast_atan2", "broadcast_complex", "broadcast_next_after", "broadcast_polygamma", "broadcast_zeta",
    "broadcast_shift_left", "broadcast_shift_right_arithmetic", "broadcast_shift_right_logical",
))
# Shardy's annotations of a one-device program (no collective: those are refused by name).
STRUCTURE_OPS = frozenset(("func.func", "func.return", "func.call", "sdy.mesh", "sdy.sharding_constraint"))
ALLOWED_OPS = STABLEHLO_OPS | CHLO_OPS | STRUCTURE_OPS
DENIED_OPS = {
    "stablehlo.rng": "RNG with state kept by the executable (a different answer every call)",
    "stablehlo.rng_bit_generator": "RNG state threaded through the program",
    "mhlo.xla.rng_get_and_update_state": "a per-executable call counter (RNG state)",
    "stablehlo.create_token": "a token (side effects)", "stablehlo.after_all": "a token (side effects)",
    # (infeed/outfeed/send/recv of any dialect: HOST_TRANSFER_OPS, reported as host transfers)
    "stablehlo.all_gather": "collective", "stablehlo.all_reduce": "collective", "stablehlo.all_to_all": "collective",
    "stablehlo.collective_permute": "collective", "stablehlo.collective_broadcast": "collective",
    "stablehlo.reduce_scatter": "collective", "stablehlo.partition_id": "multi-device",
    "stablehlo.replica_id": "multi-device",
}

# Custom-call targets, per export platform, by name. Reviewed one by one (jax's stable list and
# today's exports of the 50 workloads: no CPU workload program has a custom call at all):
# - LAPACK (CPU), cuSOLVER/cuSPARSE (CUDA), XLA's TPU linear algebra: numeric kernels that write
#   only their outputs;
# - `ApproxTopK`, `Sharding` (an annotation), `cu_lu_pivots_to_permutation`, `cu_threefry2x32_ffi`
#   (a counter-based hash of its key input: no state);
# - the Pallas kernels' own targets (`tpu_custom_call`: Mosaic TPU; `mosaic_gpu_v2`/`mosaic_gpu`,
#   `__gpu$xla.gpu.triton`, `triton_kernel_call_ffi`: GPU): the candidate's kernel itself.
# Refused although jax's stable list has them: `AllocateBuffer` (an uninitialized buffer: it can
# hand the program memory the judge freed, e.g. a reference output), `shape_assertion` (shape
# polymorphism, an error raised from the device), `SPMDFullToShardShape`/`SPMDShardToFullShape`
# (multi-device), `stablehlo.dynamic_*` (dynamic shapes; `dynamic_rng_bit_generator`: RNG state),
# `tf.call_tf_function` (host code), `annotate_device_placement` (host offloading), cuDNN's
# `__cudnn$*` (not reviewed by name).
_LAPACK = ("gees", "geev", "gehrd", "geqrf", "gesdd", "getrf", "gtsv", "potrf", "trsm")
_LAPACK_REAL = ("orgqr", "syevd", "sytrd")
_LAPACK_COMPLEX = ("ungqr", "heevd", "hetrd")
CPU_TARGETS = frozenset(
    [f"lapack_{t}{r}_ffi" for t in "sdcz" for r in _LAPACK]
    + [f"lapack_{t}{r}_ffi" for t in "sd" for r in _LAPACK_REAL]
    + [f"lapack_{t}{r}_ffi" for t in "cz" for r in _LAPACK_COMPLEX]
    + ["ApproxTopK", "Sharding"]
)
CUDA_TARGETS = frozenset((
    "cu_lu_pivots_to_permutation", "cu_threefry2x32_ffi", "cusolver_geqrf_ffi", "cusolver_gesvd_ffi",
    "cusolver_gesvdj_ffi", "cusolver_getrf_ffi", "cusolver_orgqr_ffi", "cusolver_potrf_ffi",
    "cusolver_syevd_ffi", "cusolver_sytrd_ffi", "cusparse_gtsv2_ffi", "ApproxTopK", "Sharding",
    "__gpu$xla.gpu.triton", "triton_kernel_call_ffi", "mosaic_gpu", "mosaic_gpu_v2",
))
ROCM_TARGETS = frozenset(("ApproxTopK", "Sharding", "__gpu$xla.gpu.triton", "triton_kernel_call_ffi"))
TPU_TARGETS = frozenset(("Eigh", "LuDecomposition", "ProductOfElementaryHouseholderReflectors", "Qr", "ApproxTopK",
                         "Sharding", "tpu_custom_call"))
TARGETS = {"cpu": CPU_TARGETS, "cuda": CUDA_TARGETS, "rocm": ROCM_TARGETS, "tpu": TPU_TARGETS}
# A string attribute longer than this is data (counted against the constant budget), except the
# Pallas targets' backend_config, which is the kernel itself.
MAX_PLAIN_STRING = 1024
PALLAS_TARGETS = {
    "tpu": ("tpu_custom_call",),
    "cuda": ("__gpu$xla.gpu.triton", "triton_kernel_call_ffi", "mosaic_gpu_v2", "mosaic_gpu"),
    "rocm": ("__gpu$xla.gpu.triton", "triton_kernel_call_ffi"),
    "cpu": (),
}
# Targets never allowed whatever a list says: host callbacks (Python objects of the exporting
# process, dangling pointers in the judge) and host transfers.
FORBIDDEN_TARGET = re.compile(r"callback|infeed|outfeed|host|send|recv|py_", re.I)
HOST_TRANSFER_OPS = ("infeed", "outfeed", "send", "recv")

MIN_CONSTANT_ELEMENTS = 4096  # as jb.ops.common.constant_reasons
MAX_CONSTANT_BYTES = 64 * 1024
MAX_TOTAL_CONSTANT_BYTES = 1024 * 1024
# A dense array attribute (``array<i64: ...>``) longer than this is data, not a dimension list.
MAX_PLAIN_ARRAY = 1024

# The documented serialization: jax's own flatbuffer at this jax's serialization version, holding
# a StableHLO portable artifact (MLIR bytecode whose producer is StableHLO and whose every
# operation is a versioned ``vhlo`` one), as ``jax.export.Exported.serialize`` writes it.
MLIR_BYTECODE_MAGIC = b"ML\xefR"
# What a portable artifact holds besides vhlo: Shardy's sharding annotations (jax keeps them as
# they are, joined to vhlo values by casts); each is then judged by the op allow-list after
# deserialization.
PORTABLE_PREFIXES = ("vhlo.", "sdy.")
PORTABLE_OPS = frozenset(("builtin.unrealized_conversion_cast",))
STABLEHLO_PRODUCER = re.compile(rb"StableHLO_v\d+\.\d+\.\d+")


def allowed_targets(platform: str) -> frozenset[str]:
    return TARGETS.get(platform, frozenset())


def target_allowed(target: str, platform: str, allowed: frozenset[str] | None = None) -> bool:
    if FORBIDDEN_TARGET.search(target):
        return False
    allowed = allowed_targets(platform) if allowed is None else allowed
    return target in allowed


def format_reasons(data: bytes) -> list[str]:
    """Why ``data`` (a program file) is not what jax's exporter writes: the flatbuffer's
    serialization and jax versions, and a module that is a StableHLO portable artifact (checked
    on its bytes and on its parsed operations, all ``vhlo``). Empty when it is."""
    import jax
    from jax._src.export import serialization
    from jax._src.export import serialization_generated as fb

    reasons: list[str] = []
    try:
        root = fb.Exported.GetRootAsExported(data, 0)
        version = int(root.SerializationVersion())
        jax_version = (root.JaxVersion() or b"").decode("utf-8", "replace")
        module = bytes(root.MlirModuleSerializedAsNumpy()) if root.MlirModuleSerializedLength() else b""
    except Exception as exc:  # noqa: BLE001 - not jax's flatbuffer at all
        return [f"cannot be deserialized: not a jax.export serialization: {type(exc).__name__}: {str(exc)[:200]}"]
    want = int(serialization._SERIALIZATION_VERSION)
    if version != want:
        reasons.append(f"serialization version {version}, not this jax's {want}")
    if jax_version != jax.__version__:
        reasons.append(f"serialized by jax {jax_version!r}, not the judge's {jax.__version__}")
    reasons.extend(module_format_reasons(module))
    return reasons


def module_format_reasons(module: bytes) -> list[str]:
    """Why the serialized module is not a StableHLO portable artifact (empty when it is)."""
    if not module.startswith(MLIR_BYTECODE_MAGIC):
        return ["the module is not MLIR bytecode (jax writes a StableHLO portable artifact)"]
    # The header: magic, a varint version, then the producer as a NUL-terminated string.
    at = len(MLIR_BYTECODE_MAGIC)
    while at < len(module) and module[at] & 0x80:
        at += 1
    at += 1
    end = module.find(b"\x00", at, at + 64)
    producer = module[at:end] if end > 0 else b""
    if not STABLEHLO_PRODUCER.fullmatch(producer):
        return [f"the module's producer is {producer[:40]!r}, not StableHLO (not written by jax's serializer)"]
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib.mlir import ir

    try:
        with jmlir.make_ir_context():
            raw = ir.Module.parse(module)
            names = {op.name for op in _walk(raw.operation)}
    except Exception as exc:  # noqa: BLE001
        return [f"the serialized module cannot be read as a portable artifact: {str(exc)[:200]}"]
    other = sorted(n for n in names if not n.startswith(PORTABLE_PREFIXES) and n not in PORTABLE_OPS)
    if other:
        return [f"the serialized module holds unversioned operations {', '.join(other[:6])} (a portable "
                f"artifact has only vhlo ones: not written by jax's serializer)"]
    return []


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


def _string_bytes(attr) -> int:
    """A string attribute's length in bytes (binary payloads are not valid UTF-8)."""
    try:
        return len(attr.value_bytes)
    except (AttributeError, RuntimeError, UnicodeDecodeError):
        return len(str(attr))


def _data_in(attr, ir, where: str, out: list) -> None:
    """Data an attribute embeds (appended to ``out`` as constants): dense elements of any encoding,
    long dense arrays and long strings, looked for inside arrays and dictionaries too."""
    if isinstance(attr, (ir.ArrayAttr, ir.DictAttr)):
        for i in range(len(attr)):
            item = attr[i]
            _data_in(item.attr if isinstance(attr, ir.DictAttr) else item, ir, where, out)
        return
    name = type(attr).__name__
    if isinstance(attr, ir.DenseElementsAttr) or name.startswith("DenseResourceElements"):
        try:
            rtype = ir.ShapedType(attr.type)
            shape = [int(d) for d in rtype.shape]
            etype = str(rtype.element_type)
        except Exception:  # noqa: BLE001
            shape, etype = [1 << 20], "i8"  # unknown size: counted as too much
        size = int(np.prod(shape)) if shape else 1
        splat = isinstance(attr, ir.DenseElementsAttr) and bool(attr.is_splat)
        out.append({"shape": shape, "dtype": etype, "size": size, "bytes": (size * _element_bits(etype) + 7) // 8,
                    "splat": splat, "in": where})
    elif name.startswith("Dense") and name.endswith("ArrayAttr") and len(attr) > MAX_PLAIN_ARRAY:
        out.append({"shape": [len(attr)], "dtype": "i64", "size": len(attr), "bytes": 8 * len(attr), "splat": False,
                    "in": where})
    elif isinstance(attr, ir.StringAttr) and (n := _string_bytes(attr)) > MAX_PLAIN_STRING:
        out.append({"shape": [n], "dtype": "i8", "size": n, "bytes": n, "splat": False, "in": where})


def scan_module(exported, platform: str) -> Inspection:
    """Walk every operation of the exported module: reasons for any operation not on the
    allow-list, any custom call not listed for the platform, tokens and side effects; every
    attribute that embeds data is counted as a constant."""
    from jax._src.lib.mlir import ir

    reasons: list[str] = []
    targets: list[str] = []
    constants: list[dict] = []
    transfers: set[str] = set()
    unlisted: set[str] = set()
    denied: dict[str, str] = {}
    effects: set[str] = set()
    tokens = False
    external: list[str] = []
    count = 0
    allowed = allowed_targets(platform)
    pallas_targets = PALLAS_TARGETS.get(platform, ())
    try:
        ctx, module = _parse(exported)
    except Exception as exc:  # noqa: BLE001 - an unparseable module is rejected, never run
        return Inspection([f"the program's StableHLO module cannot be parsed: {exc}"[:500]], [], [], False, 0)
    with ctx:
        for op in _walk(module.operation):
            count += 1
            name = op.name
            short = name.split(".", 1)[-1]
            if short in HOST_TRANSFER_OPS:
                transfers.add(name)
            elif name in DENIED_OPS:
                denied[name] = DENIED_OPS[name]
            elif name not in ALLOWED_OPS:
                unlisted.add(name)
            types = [str(v.type) for v in op.results] + [str(v.type) for v in op.operands]
            if any("token" in t for t in types):
                tokens = True
            target = None
            if short == "custom_call":
                attr = op.attributes["call_target_name"] if "call_target_name" in op.attributes else None
                target = ir.StringAttr(attr).value if attr is not None else "<unnamed>"
                targets.append(target)
                side = op.attributes["has_side_effect"] if "has_side_effect" in op.attributes else None
                if side is not None and str(side) == "true" and target not in pallas_targets:
                    effects.add(target)
            elif name == "stablehlo.constant":
                try:
                    constants.append(_constant(op, ir))
                except Exception as exc:  # noqa: BLE001
                    reasons.append(f"a constant of unknown size: {exc}"[:300])
            elif name == "func.func" and not op.regions[0].blocks:
                sym = op.attributes["sym_name"] if "sym_name" in op.attributes else None
                external.append(ir.StringAttr(sym).value if sym is not None else "?")
            attrs = op.attributes
            for i in range(len(attrs)):
                named = attrs[i]
                if name == "stablehlo.constant" and named.name == "value":
                    continue  # counted above
                if target in pallas_targets and named.name == "backend_config":
                    continue  # the Pallas kernel itself (Mosaic / Triton code), not data
                _data_in(named.attr, ir, f"{name} {named.name}", constants)
    bad = sorted({t for t in targets if not target_allowed(t, platform, allowed)})
    if any(FORBIDDEN_TARGET.search(t) for t in bad):
        reasons.append("host callbacks in the program: custom calls " + ", ".join(t for t in bad if FORBIDDEN_TARGET.search(t)))
    others = [t for t in bad if not FORBIDDEN_TARGET.search(t)]
    if others:
        reasons.append(f"custom calls outside the {platform} allow-list: {', '.join(others)}")
    if effects:
        reasons.append(f"custom calls with side effects: {', '.join(sorted(effects))}")
    if transfers:
        reasons.append(f"host transfers in the program: {', '.join(sorted(transfers))}")
    for name, why in sorted(denied.items()):
        reasons.append(f"operation {name} is not allowed: {why}")
    if tokens:
        reasons.append("the program threads tokens (side effects): a pure function needs none")
    if unlisted:
        reasons.append(f"operations outside the allow-list: {', '.join(sorted(unlisted)[:8])}")
    if external:
        reasons.append(f"functions declared without a body (external symbols): {', '.join(external[:8])}")
    pallas = sorted({t for t in targets if t in pallas_targets})
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
