"""Forcing Pallas into interpret mode on CPU for kernels written for TPU.

What works on jax 0.10.2 (measured):

* A plain ``pl.pallas_call`` without ``interpret=`` fails to lower on CPU ("Only interpret mode is
  supported on CPU backend"). The interpret flag is a parameter of the ``pallas_call`` primitive
  and is only consulted when the primitive is LOWERED, so ``generic`` mode registers a CPU-only
  lowering rule for ``pallas_call_p`` that lowers every call with ``interpret=True`` (unless the
  kernel already asked for an interpreter). This needs no cooperation from the kernel, ignores
  ``interpret=False``, is independent of trace-time context managers and leaves TPU/GPU lowering
  untouched. The generic interpreter accepts TPU specs: ``pltpu.PrefetchScalarGridSpec`` (scalar
  prefetch), ``pltpu.VMEM``/``SMEM`` scratch, ``pl.ANY`` + ``pltpu.make_async_copy`` + DMA
  semaphores, ``pltpu.CompilerParams(dimension_semantics=...)``, ``pltpu.roll``, ``pltpu.bitcast``,
  ``pl.multiple_of``.
* ``tpu`` mode uses ``pltpu.force_tpu_interpret_mode(pltpu.InterpretParams())``: the TPU simulator
  (HBM/VMEM/SMEM, DMAs, semaphores, race detection). The value is read when ``pallas_call`` is
  TRACED (and is part of the jit cache key), so the first call of a jitted function must happen
  inside the context. 10-100x slower, but it implements TPU-only primitives the generic
  interpreter lacks (e.g. ``pltpu.prng_seed``: "MLIR translation rule for primitive 'prng_seed'
  not found for platform cpu"). After an exception in this mode,
  ``pltpu.reset_tpu_interpret_mode_state()`` must be called.
* ``auto`` (the default) compiles in ``generic`` mode and retries in ``tpu`` mode when the failure
  is a missing CPU lowering of a TPU primitive (see :func:`should_retry_tpu`).

The harness compiles ahead of time (``jit(...).trace(...).lower().compile()``) and calls the
``Compiled`` object, so once compiled the mode no longer matters.
"""

from __future__ import annotations

import contextlib
import threading

MODES = ("auto", "generic", "tpu", "none")

_lock = threading.Lock()
_generic_installed = False


def install_generic() -> None:
    """Register the CPU lowering of ``pallas_call`` that forces the generic interpreter (idempotent)."""
    global _generic_installed
    with _lock:
        if _generic_installed:
            return
        from jax._src.interpreters import mlir
        from jax._src.pallas import pallas_call as pallas_call_mod

        original = pallas_call_mod._pallas_call_lowering

        def _forced_interpret_lowering(ctx, *in_nodes, interpret, **params):
            return original(ctx, *in_nodes, interpret=interpret or True, **params)

        mlir.register_lowering(pallas_call_mod.pallas_call_p, _forced_interpret_lowering, platform="cpu")
        _generic_installed = True


def needs_interpret(backend: str) -> bool:
    return backend == "cpu"


def enable(backend: str) -> bool:
    """Make Pallas kernels runnable on ``backend``; returns whether they run interpreted."""
    if not needs_interpret(backend):
        return False
    install_generic()
    return True


def context(mode: str | None):
    """Trace-time context for ``mode`` (only ``tpu`` needs one)."""
    if mode == "tpu":
        from jax.experimental.pallas import tpu as pltpu

        return pltpu.force_tpu_interpret_mode(pltpu.InterpretParams())
    return contextlib.nullcontext()


def reset_after_error(mode: str | None) -> None:
    if mode != "tpu":
        return
    try:
        from jax.experimental.pallas import tpu as pltpu

        pltpu.reset_tpu_interpret_mode_state()
    except Exception:  # noqa: BLE001 - best effort cleanup
        pass


def should_retry_tpu(exc: BaseException) -> bool:
    """True when a generic-interpret failure looks like a TPU primitive the generic interpreter lacks."""
    text = f"{type(exc).__name__}: {exc}"
    markers = (
        "not found for platform cpu",
        "MLIR translation rule for primitive",
        "No interpret rule",
        "discharge rule",
        "Only interpret mode is supported",
    )
    return isinstance(exc, NotImplementedError) or any(m in text for m in markers)


def first_mode(requested: str | None, backend: str) -> str | None:
    """The interpreter to try first for ``requested`` on ``backend`` (None: compile natively)."""
    if not needs_interpret(backend):
        return None
    requested = requested or "auto"
    if requested not in MODES:
        raise ValueError(f"unknown interpret_mode {requested!r}; expected one of {MODES}")
    if requested == "none":
        return None
    return "tpu" if requested == "tpu" else "generic"


# ----------------------------------------------------------------------------------------------
# Mosaic GPU on CPU (the GPU track's pre-flight). jax 0.12 ships a GPU interpreter
# (``plgpu.InterpretGPUParams`` / ``plgpu.force_gpu_interpret_mode``: GMEM/SMEM, barriers, TMA
# simulated on the host). Kernels that size their grid from the device (``get_num_sms``) need an
# abstract GPU device while they are traced, and a program traced under an abstract mesh must be
# lowered for an explicit platform and compiled with a device assignment: :func:`gpu_preflight`.


class NoGpuInterpreter(RuntimeError):
    pass


def gpu_interpreter():
    """``plgpu.force_gpu_interpret_mode(plgpu.InterpretGPUParams())``; NoGpuInterpreter where the
    installed jax has none."""
    try:
        from jax.experimental.pallas import mosaic_gpu as plgpu

        force, params = plgpu.force_gpu_interpret_mode, plgpu.InterpretGPUParams
    except (ImportError, AttributeError) as exc:
        raise NoGpuInterpreter(f"this jax has no Mosaic GPU interpreter ({exc}); the GPU track is checked by export only") from exc
    return force(params())


def gpu_preflight(fn, *args, device_kind: str | None = None, num_sms: int | None = None, static_argnums=()):
    """Run a Mosaic GPU ``fn`` on this CPU host in the GPU interpreter, as traced for ``device_kind``
    (with ``num_sms`` SMs: few keep the simulation short): returns its outputs."""
    import dataclasses

    import jax

    from jb import platforms

    kind = platforms.kind(device_kind, "gpu")
    if num_sms is not None:
        kind = dataclasses.replace(kind, num_cores=int(num_sms))
    from jax.sharding import use_abstract_mesh

    with gpu_interpreter():
        with use_abstract_mesh(platforms.abstract_mesh(kind)):
            traced = jax.jit(fn, static_argnums=static_argnums).trace(*args)
        compiled = traced.lower(lowering_platforms=("cpu",)).compile(device_assignment=(jax.devices("cpu")[0],))
    dynamic = [a for i, a in enumerate(args) if i not in static_argnums]
    return compiled(*dynamic)
