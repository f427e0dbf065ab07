"""Shared machinery of the worker ops: request context, ahead-of-time build, error classes, jaxpr checks."""

from __future__ import annotations

import dataclasses
import math
import pathlib
import time
import traceback
from typing import Any, Callable

import jax
import numpy as np
from jax._src import array as _jax_array

from jb import interpret as interp
from jb import jaxcompat, platforms
from jb.impl import Impl, error_tail, resolve
from jb.workload import Workload, load_workload

_perf_counter = time.perf_counter
_tree_leaves = jax.tree_util.tree_leaves
_ArrayImpl = _jax_array.ArrayImpl
_array_block = _jax_array.ArrayImpl.block_until_ready  # captured before any candidate is imported


def block(tree):
    """Wait for every array leaf of ``tree`` (with the harness's own, captured, methods)."""
    for leaf in _tree_leaves(tree):
        if isinstance(leaf, _ArrayImpl):
            _array_block(leaf)
    return tree


PALLAS_PRIMITIVES = ("pallas_call", "core_map")
HOST_CALLBACKS = ("pure_callback", "io_callback")


class CandidateFailure(Exception):
    """A failure that is the implementation's fault; becomes ``result.status``."""

    def __init__(self, status: str, error_class: str, message: str, stage: str | None = None):
        super().__init__(message)
        self.status = status
        self.error_class = error_class
        self.message = message
        self.stage = stage

    def fields(self) -> dict:
        return {"error_class": self.error_class, "error": self.message}

    def as_result(self) -> dict:
        return {"status": self.status, **self.fields()}


def default_backend() -> str:
    return jax.default_backend()


@dataclasses.dataclass
class Request:
    args: dict
    backend: str
    scale: str
    interpret: bool
    interpret_mode: str | None

    # The target of an export made without the device (``backend`` names the accelerator while
    # JAX runs on CPU, see jb.platforms); None: the local backend.
    target: str | None = None
    device_kind: str | None = None

    @classmethod
    def from_args(cls, args: dict, export: bool = False) -> "Request":
        """The request of an op; ``export``: the backend may be an accelerator this CPU-only process
        does not have (the export stage serializes for it without opening it)."""
        backend = args.get("backend") or default_backend()
        actual = default_backend()
        device_kind = args.get("device_kind") or None
        if backend != actual:
            if not (export and actual == "cpu" and backend in ("tpu", "gpu")):
                raise ValueError(f"requested backend {backend!r} but JAX runs on {actual!r}"
                                 + ("" if export else " (only export serializes for another backend, from CPU)"))
            scale = args.get("scale")
            if not scale:
                raise ValueError("missing arg 'scale' (tiny, cpu or paper)")
            platforms.kind(device_kind, backend)  # a bad kind is the caller's error, said now
            return cls(args=args, backend=backend, scale=scale, interpret=False, interpret_mode=None,
                       target=backend, device_kind=device_kind)
        # The default scale is jb's rule (src/pipeline/mod.rs `default_scale`), the one place of
        # it: jb always says which scale a step runs at.
        scale = args.get("scale")
        if not scale:
            raise ValueError("missing arg 'scale' (tiny, cpu or paper)")
        interpret = interp.enable(backend)
        mode = interp.first_mode(args.get("interpret_mode"), backend)
        return cls(args=args, backend=backend, scale=scale, interpret=interpret, interpret_mode=mode)

    def workload(self) -> Workload:
        path = self.args.get("workload")
        if not path:
            raise ValueError("missing arg 'workload' (path of the workload folder)")
        return load_workload(path, self.scale)

    def impl(self, wl: Workload) -> Impl:
        return resolve(self.args.get("impl"), wl, self.backend, self.interpret)

    def out_dir(self) -> pathlib.Path | None:
        out = self.args.get("out_dir")
        if not out:
            return None
        path = pathlib.Path(out)
        path.mkdir(parents=True, exist_ok=True)
        return path


# ----------------------------------------------------------------------------------------------
# Error classification


def _frames(exc: BaseException) -> list[str]:
    names = []
    seen = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        names += [f.filename for f in traceback.extract_tb(cur.__traceback__)]
        cur = cur.__cause__ or cur.__context__
    return names


def is_pallas_error(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}"
    if "pallas" in text.lower() or "mosaic" in text.lower():
        return True
    frames = _frames(exc)
    # The innermost jax frame decides: an error raised inside jax/_src/pallas is a Pallas API misuse.
    jax_frames = [f for f in frames if "/jax/" in f]
    return bool(jax_frames) and "/pallas/" in jax_frames[-1]


def classify(exc: BaseException, stage: str) -> CandidateFailure:
    """Map an exception raised at ``stage`` (trace|lower|compile|run) to a status and error class."""
    if isinstance(exc, CandidateFailure):
        return exc
    msg = error_tail(exc)
    if stage == "run":
        if isinstance(exc, MemoryError) or "RESOURCE_EXHAUSTED" in msg:
            return CandidateFailure("runtime_error", "oom", msg, stage)
        return CandidateFailure("runtime_error", "runtime", msg, stage)
    if is_pallas_error(exc):
        return CandidateFailure("compile_error", "pallas_api", msg, stage)
    if isinstance(exc, MemoryError) or "RESOURCE_EXHAUSTED" in msg:
        return CandidateFailure("compile_error", "oom", msg, stage)
    return CandidateFailure("compile_error", {"trace": "trace", "lower": "lower"}.get(stage, "compile"), msg, stage)


# ----------------------------------------------------------------------------------------------
# Ahead-of-time build


@dataclasses.dataclass
class Built:
    compiled: Any
    lowered: Any
    jaxpr: Any  # ClosedJaxpr
    static_argnums: tuple[int, ...]
    interpret_mode: str | None
    compile_ms: float
    trace_ms: float
    module_name: str | None

    def dynamic(self, inputs) -> tuple:
        return tuple(a for i, a in enumerate(inputs) if i not in self.static_argnums)

    def __call__(self, *inputs):
        return self.compiled(*self.dynamic(inputs))


def _module_name(compiled) -> str | None:
    try:
        return compiled.runtime_executable().hlo_modules()[0].name
    except Exception:  # noqa: BLE001 - older/newer APIs
        pass
    try:
        first = compiled.as_text().split("\n", 1)[0]
        if first.startswith("HloModule "):
            return first.split()[1].rstrip(",")
    except Exception:  # noqa: BLE001
        pass
    return None


def _build_once(fn: Callable, inputs, static_argnums, mode) -> Built:
    stage = "trace"
    try:
        with interp.context(mode):
            t0 = _perf_counter()
            traced = jax.jit(fn, static_argnums=static_argnums).trace(*inputs)
            t1 = _perf_counter()
            stage = "lower"
            lowered = traced.lower()
            stage = "compile"
            compiled = lowered.compile()
            t2 = _perf_counter()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit from candidate code included
        interp.reset_after_error(mode)
        raise classify(exc, stage) from exc
    return Built(
        compiled=compiled, lowered=lowered, jaxpr=traced.jaxpr, static_argnums=tuple(static_argnums),
        interpret_mode=mode, compile_ms=(t2 - t0) * 1e3, trace_ms=(t1 - t0) * 1e3,
        module_name=_module_name(compiled),
    )


def build(fn: Callable, wl: Workload, inputs, req: Request) -> Built:
    """Trace, lower and compile ``fn`` for ``inputs``; raises CandidateFailure on the impl's fault."""
    mode = req.interpret_mode
    try:
        return _build_once(fn, inputs, wl.static_argnums, mode)
    except CandidateFailure as failure:
        requested = req.args.get("interpret_mode") or "auto"
        cause = failure.__cause__
        if mode == "generic" and requested == "auto" and cause is not None and interp.should_retry_tpu(cause):
            try:
                return _build_once(fn, inputs, wl.static_argnums, "tpu")
            except CandidateFailure:
                pass
        raise


class WorkloadError(RuntimeError):
    """The workload's own function failed: a workload or harness bug (ok:false), never a result."""


def build_reference(wl: Workload, inputs, req: Request) -> Built:
    try:
        return _build_once(wl.fn, inputs, wl.static_argnums, None)
    except CandidateFailure as failure:
        raise WorkloadError(f"the reference {wl.name}:workload failed ({failure.error_class}): {failure.message}") from failure


def run_reference(built: Built, inputs):
    try:
        return run(built, inputs)
    except CandidateFailure as failure:
        raise WorkloadError(f"the reference failed at run time: {failure.message}") from failure


def run(built: Built, inputs):
    """Run and wait for the whole output pytree; runtime failures become CandidateFailure."""
    try:
        return block(built(*inputs))
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001
        interp.reset_after_error(built.interpret_mode)
        raise classify(exc, "run") from exc


# ----------------------------------------------------------------------------------------------
# Analyses


def cost_dict(cost) -> dict:
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else {}
    cost = cost or {}

    def get(key):
        v = cost.get(key)
        return float(v) if v is not None and math.isfinite(float(v)) else None

    return {"flops": get("flops"), "bytes_accessed": get("bytes accessed"), "transcendentals": get("transcendentals")}


def safe_cost(stage_obj) -> dict:
    try:
        return cost_dict(stage_obj.cost_analysis())
    except Exception:  # noqa: BLE001 - not every backend implements it
        return {"flops": None, "bytes_accessed": None, "transcendentals": None}


def memory_dict(compiled) -> dict:
    try:
        mem = compiled.memory_analysis()
    except Exception:  # noqa: BLE001
        mem = None
    out: dict[str, int | None] = {}
    for field, key in (
        ("argument_size_in_bytes", "argument_bytes"),
        ("output_size_in_bytes", "output_bytes"),
        ("temp_size_in_bytes", "temp_bytes"),
        ("alias_size_in_bytes", "alias_bytes"),
        ("generated_code_size_in_bytes", "generated_code_bytes"),
        ("peak_memory_in_bytes", "peak_bytes"),
    ):
        value = getattr(mem, field, None) if mem is not None else None
        out[key] = int(value) if value is not None else None
    return out


def _sub_jaxprs(value):
    parts = jaxcompat.jaxpr_parts(value)
    if parts is not None:
        yield parts
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _sub_jaxprs(v)


def _walk(jaxpr, consts, visit, depth=0):
    """Call ``visit(kind, obj, depth)`` for every const and equation, recursively."""
    for c in consts:
        visit("const", c, depth)
    for eqn in jaxpr.eqns:
        visit("eqn", eqn, depth)
        for value in eqn.params.values():
            for sub, sub_consts in _sub_jaxprs(value):
                _walk(sub, sub_consts, visit, depth + 1)


def jaxpr_report(closed) -> dict:
    """Pallas presence, host callbacks, closed-over constants and matmul-FLOP split of a ClosedJaxpr."""
    prims: set[str] = set()
    consts: list[dict] = []

    def visit(kind, obj, depth):
        if kind == "eqn":
            prims.add(obj.primitive.name)
        else:
            shape = tuple(getattr(obj, "shape", ()))
            size = int(np.prod(shape)) if shape else 1
            dtype = getattr(obj, "dtype", None)
            try:
                itemsize = np.dtype(dtype).itemsize if dtype is not None else 8
            except TypeError:  # not a numpy type: Mosaic GPU barriers, semaphores (no data)
                itemsize = 0
            consts.append({"shape": list(shape), "dtype": str(dtype), "size": size, "bytes": size * itemsize})

    jaxpr, top_consts = jaxcompat.jaxpr_parts(closed)
    _walk(jaxpr, top_consts, visit)
    inside, outside, unknown_trip = _matmul_flops(jaxpr)
    total = inside + outside
    return {
        "has_pallas_call": any(p in prims for p in PALLAS_PRIMITIVES),
        "host_callbacks": sorted(p for p in prims if p in HOST_CALLBACKS),
        "debug_callbacks": "debug_callback" in prims,
        "primitives": sorted(prims),
        "constants": sorted(consts, key=lambda c: -c["size"]),
        "matmul_flops": {
            "inside_pallas": inside,
            "outside_pallas": outside,
            "share_outside": (outside / total) if total else None,
            "loops_counted_once": unknown_trip,
        },
    }


def _dot_flops(eqn) -> int:
    lhs = eqn.invars[0].aval
    out = eqn.outvars[0].aval
    (lhs_contract, _), _ = eqn.params["dimension_numbers"]
    k = int(np.prod([lhs.shape[d] for d in lhs_contract])) if lhs_contract else 1
    return 2 * int(np.prod(out.shape)) * k


def _conv_flops(eqn) -> int:
    rhs = eqn.invars[1].aval
    out = eqn.outvars[0].aval
    dn = eqn.params.get("dimension_numbers")
    out_feature_dim = dn.rhs_spec[0] if dn is not None else 0
    per_output = int(np.prod(rhs.shape)) // max(1, rhs.shape[out_feature_dim])
    return 2 * int(np.prod(out.shape)) * per_output


def _matmul_flops(jaxpr, mult: int = 1, in_pallas: bool = False):
    inside = outside = 0
    unknown = False
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        flops = 0
        try:
            if name == "dot_general":
                flops = _dot_flops(eqn)
            elif name == "conv_general_dilated":
                flops = _conv_flops(eqn)
        except Exception:  # noqa: BLE001 - exotic avals
            flops = 0
        if in_pallas:
            inside += flops * mult
        else:
            outside += flops * mult
        sub_mult, sub_in = mult, in_pallas
        if name in PALLAS_PRIMITIVES:
            sub_in = True
            gm = eqn.params.get("grid_mapping")
            grid = getattr(gm, "grid", ()) or ()
            try:
                sub_mult = mult * int(np.prod([int(g) for g in grid])) if grid else mult
            except TypeError:  # dynamic grid
                unknown = True
        elif name == "scan":
            sub_mult = mult * int(eqn.params.get("length", 1))
        elif name == "while":
            unknown = True
        subs = [s for v in eqn.params.values() for s, _ in _sub_jaxprs(v)]
        if name == "cond" and subs:
            best = max((_matmul_flops(s, sub_mult, sub_in) for s in subs), key=lambda r: r[0] + r[1])
            inside, outside, unknown = inside + best[0], outside + best[1], unknown or best[2]
            continue
        for sub in subs:
            i, o, u = _matmul_flops(sub, sub_mult, sub_in)
            inside, outside, unknown = inside + i, outside + o, unknown or u
    return inside, outside, unknown


def input_leaf_sizes(inputs) -> list[int]:
    return [int(np.prod(leaf.shape)) for leaf in jax.tree_util.tree_leaves(inputs) if hasattr(leaf, "shape") and leaf.shape]


def constant_reasons(report: dict, inputs, outputs=(), min_size: int = 4096) -> tuple[list[str], list[str]]:
    """(notes, rejections) for closed-over constants of at least ``min_size`` elements.

    A constant as big as an input or an output (of at least ``min_size`` elements) rejects: it can
    only be baked-in data (an expected output, a copy of a weight); smaller ones are noted.
    """
    sized = [(f"input {i}", s) for i, s in enumerate(input_leaf_sizes(inputs)) if s >= min_size]
    sized += [(f"output {i}", int(np.prod(getattr(o, "shape", ()) or (1,)))) for i, o in enumerate(outputs)]
    sized = [(name, s) for name, s in sized if s >= min_size]
    notes, rejects = [], []
    for c in report["constants"]:
        if c["size"] < min_size:
            continue
        text = f"closed-over constant {c['dtype']}{tuple(c['shape'])} ({c['bytes']} bytes) folded into the program"
        match = [(name, s) for name, s in sized if c["size"] >= s]
        if match:
            name, size = min(match, key=lambda m: m[1])
            rejects.append(text + f": as big as {name} ({size} elements)")
        else:
            notes.append(text)
    return notes, rejects


def describe_leaf(leaf) -> dict:
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
        return {"shape": [int(d) for d in leaf.shape], "dtype": str(leaf.dtype)}
    return {"value": leaf if isinstance(leaf, (int, float, bool, str)) or leaf is None else repr(leaf), "type": type(leaf).__name__}


def stats(samples: list[float]) -> dict:
    if not samples:
        return {"median_ms": None, "mean_ms": None, "std_ms": None, "min_ms": None, "max_ms": None, "p90_ms": None}
    arr = np.asarray(samples, dtype=np.float64)
    return {
        "median_ms": float(np.median(arr)),
        "mean_ms": float(arr.mean()),
        "std_ms": float(arr.std(ddof=1)) if arr.size > 1 else 0.0,
        "min_ms": float(arr.min()),
        "max_ms": float(arr.max()),
        "p90_ms": float(np.percentile(arr, 90)),
    }
