"""Harness protection: what a candidate must not touch, and how the harness notices when it does.

``capture()`` is taken before a candidate is imported; ``check(snapshot)`` after import and after the
candidate ran. It reports, as human-readable reasons:

* harness functions replaced (identity check): the timers of ``time``, ``jax.block_until_ready`` and
  friends, ``jax.profiler.*``, the methods of ``jax.Array``'s implementation class and of the AOT
  stage classes, every public numpy function, statistics/json/hashlib helpers, the builtins the
  harness uses, and every function and class of the ``jb`` package itself (names added to a ``jb``
  module or to a guarded class are reported too, because they can shadow a builtin);
* the code of those functions (and of the methods of ``jb``'s classes) swapped in place:
  ``__code__``, ``__defaults__``, ``__kwdefaults__`` (an identity check does not see it);
* ``sys.modules`` entries of those modules replaced;
* a trace or profile hook installed (``sys.settrace``/``sys.setprofile``/``threading`` hooks);
* signal handlers changed, jax config flags that change what is measured (``jax_disable_jit``,
  ``jax_enable_x64``, ...);
* Python threads started and still running, child processes still alive.

The reference state is a process-wide *baseline* (``baseline()``), captured once when the worker
is ready (``rebaseline()``), before any implementation is imported. Every op compares against it,
so a candidate that patched something while a previous op of the same worker imported it (compile,
then verify, then profile) is still caught.

``checksum(inputs)`` fingerprints input leaves so that mutation (or donation, which deletes the
buffer) by a candidate is detected.
"""

from __future__ import annotations

import builtins
import dataclasses
import hashlib
import signal
import sys
import threading
import time
from typing import Any

import numpy as np

_BUILTIN_NAMES = (
    "print", "len", "max", "min", "sum", "abs", "sorted", "isinstance", "float", "int", "str", "open",
    "repr", "any", "all", "zip", "range", "enumerate", "getattr", "setattr", "hasattr", "type", "id",
    "iter", "next", "round", "list", "dict", "tuple", "set", "bool", "callable", "__import__",
)
_TIME_NAMES = (
    "perf_counter", "perf_counter_ns", "time", "time_ns", "monotonic", "monotonic_ns", "process_time",
    "sleep",
)
_JAX_NAMES = (
    "block_until_ready", "jit", "device_get", "device_put", "make_jaxpr", "eval_shape", "devices",
    "default_backend", "clear_caches", "local_devices", "live_arrays",
)
_CONFIG_FLAGS = ("jax_disable_jit", "jax_enable_x64", "jax_platforms", "jax_default_device")
_SIGNALS = tuple(s for s in (getattr(signal, n, None) for n in ("SIGTERM", "SIGINT", "SIGALRM", "SIGUSR1")) if s)


def _public(namespace: dict) -> dict[str, Any]:
    out = {}
    for name, obj in namespace.items():
        if name.startswith("__") and name not in ("__call__", "__array__", "__init__", "__getattr__"):
            continue
        if callable(obj) or isinstance(obj, (property, staticmethod, classmethod)):
            out[name] = obj
    return out


def _namespaces() -> list[tuple[str, Any, dict, bool]]:
    """(label, owner, {name: object}, report_additions) for everything the harness relies on."""
    import gzip
    import json
    import os
    import shutil
    import statistics

    import jax
    import jax.profiler
    import jax.tree_util

    def pick(owner, names):
        return {n: getattr(owner, n) for n in names if hasattr(owner, n)}

    spaces: list[tuple[str, Any, dict, bool]] = [
        ("builtins", builtins, pick(builtins, _BUILTIN_NAMES), False),
        ("time", time, pick(time, _TIME_NAMES), False),
        ("jax", jax, pick(jax, _JAX_NAMES), False),
        ("jax.profiler", jax.profiler, _public(vars(jax.profiler)), False),
        ("jax.tree_util", jax.tree_util, _public(vars(jax.tree_util)), False),
    ]
    try:
        from jax._src import profiler as src_profiler

        spaces.append(("jax._src.profiler", src_profiler, _public(vars(src_profiler)), False))
    except ImportError:  # pragma: no cover
        pass
    try:
        from jax._src import array as src_array

        spaces.append(("jax.ArrayImpl", src_array.ArrayImpl, _public(vars(src_array.ArrayImpl)), True))
    except (ImportError, AttributeError):  # pragma: no cover
        pass
    try:
        from jax._src import stages

        for cls_name in ("Compiled", "Lowered", "Traced"):
            cls = getattr(stages, cls_name, None)
            if cls is not None:
                spaces.append((f"jax.stages.{cls_name}", cls, _public(vars(cls)), True))
    except ImportError:  # pragma: no cover
        pass
    spaces += [
        ("numpy", np, _public(vars(np)), False),
        ("statistics", statistics, _public(vars(statistics)), False),
        ("json", json, pick(json, ("dumps", "loads", "dump", "load")), False),
        ("gzip", gzip, pick(gzip, ("open",)), False),
        ("hashlib", hashlib, pick(hashlib, ("blake2b", "sha256")), False),
        ("shutil", shutil, pick(shutil, ("copy2", "copyfile", "copytree", "rmtree")), False),
        ("os", os, pick(os, ("write", "dup", "dup2", "fsync", "walk", "listdir", "makedirs", "getpid", "replace")), False),
        ("threading", threading, pick(threading, ("enumerate",)), False),
        ("threading.Thread", threading.Thread, pick(threading.Thread, ("start", "run", "join")), False),
    ]
    for name, module in sorted(sys.modules.items()):
        if module is None or not (name == "jb" or name.startswith("jb.")):
            continue
        spaces.append((name, module, _public(vars(module)), True))
    return spaces


def _modules_of_interest() -> dict[str, Any]:
    names = ["time", "jax", "jax.profiler", "numpy", "json", "statistics"]
    names += [n for n in sys.modules if n == "jb" or n.startswith("jb.")]
    return {n: sys.modules.get(n) for n in names}


def _config_values() -> dict[str, Any]:
    import jax

    out = {}
    for flag in _CONFIG_FLAGS:
        try:
            out[flag] = getattr(jax.config, flag)
        except AttributeError:
            continue
    return out


def _children() -> set[int]:
    try:
        import psutil

        return {p.pid for p in psutil.Process().children(recursive=True) if p.is_running()}
    except Exception:  # noqa: BLE001 - psutil missing or a race with an exiting child
        return set()


def _code_of(obj) -> tuple | None:
    fn = getattr(obj, "__func__", obj)  # bound/class/static methods: the function underneath
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    return (code, getattr(fn, "__defaults__", None), getattr(fn, "__kwdefaults__", None))


def _same_code(a: tuple | None, b: tuple) -> bool:
    return a is not None and all(x is y for x, y in zip(a, b))


def _codes(functions: dict[str, Any]) -> dict[str, tuple]:
    """The code objects of every guarded Python function and of the methods of jb's classes."""
    out = {}
    for key, obj in functions.items():
        code = _code_of(obj)
        if code is not None:
            out[key] = (obj, code)
        if isinstance(obj, type) and obj.__module__.split(".")[0] == "jb":
            for name, member in vars(obj).items():
                member = getattr(member, "__func__", member)
                if isinstance(member, property):
                    member = member.fget
                code = _code_of(member)
                if code is not None:
                    out[f"{key}.{name}"] = (member, code)
    return out


@dataclasses.dataclass
class Snapshot:
    functions: dict[str, Any]
    keys: dict[str, set]
    additions: dict[str, bool]
    modules: dict[str, Any]
    threads: set[int]
    children: set[int]
    trace_hooks: tuple
    signals: dict[int, Any]
    config: dict[str, Any]
    codes: dict[str, tuple] = dataclasses.field(default_factory=dict)


def capture() -> Snapshot:
    functions: dict[str, Any] = {}
    keys: dict[str, set] = {}
    additions: dict[str, bool] = {}
    for label, _owner, space, report_additions in _namespaces():
        keys[label] = set(space)
        additions[label] = report_additions
        for name, obj in space.items():
            functions[f"{label}.{name}"] = obj
    hooks = (sys.gettrace(), sys.getprofile(), getattr(threading, "_trace_hook", None), getattr(threading, "_profile_hook", None))
    return Snapshot(
        functions=functions,
        keys=keys,
        additions=additions,
        modules=_modules_of_interest(),
        threads={t.ident for t in threading.enumerate()},
        children=_children(),
        trace_hooks=hooks,
        signals={s: signal.getsignal(s) for s in _SIGNALS},
        config=_config_values(),
        codes=_codes(functions),
    )


_baseline: Snapshot | None = None


def baseline() -> Snapshot:
    """The process-wide reference snapshot (captured on first use)."""
    global _baseline
    if _baseline is None:
        _baseline = capture()
    return _baseline


def rebaseline() -> Snapshot:
    """Capture the reference snapshot now (the worker calls it before answering any request)."""
    global _baseline
    _baseline = capture()
    return _baseline


def tampering(snapshot: Snapshot) -> list[str]:
    """Reasons for every harness function, module, hook, signal or flag changed since ``snapshot``."""
    reasons: list[str] = []
    changed: list[str] = []
    for label, _owner, space, _ in _namespaces():
        before = snapshot.keys.get(label)
        if before is None:
            continue
        for name in sorted(before):
            key = f"{label}.{name}"
            if name not in space:
                changed.append(f"{key} (deleted)")
            elif space[name] is not snapshot.functions[key]:
                changed.append(key)
        if snapshot.additions.get(label):
            for name in sorted(set(space) - before):
                changed.append(f"{label}.{name} (added)")
    if changed:
        shown = ", ".join(changed[:8]) + (f" and {len(changed) - 8} more" if len(changed) > 8 else "")
        reasons.append(f"harness functions replaced: {shown}")
    swapped = sorted(key for key, (fn, code) in snapshot.codes.items() if not _same_code(_code_of(fn), code))
    if swapped:
        shown = ", ".join(swapped[:8]) + (f" and {len(swapped) - 8} more" if len(swapped) > 8 else "")
        reasons.append(f"code of harness functions swapped (__code__/__defaults__): {shown}")
    for name, module in snapshot.modules.items():
        if module is not None and sys.modules.get(name) is not module:
            reasons.append(f"sys.modules[{name!r}] replaced")
    hooks = (sys.gettrace(), sys.getprofile(), getattr(threading, "_trace_hook", None), getattr(threading, "_profile_hook", None))
    if hooks != snapshot.trace_hooks:
        reasons.append("a trace/profile hook was installed (sys.settrace/setprofile)")
    for sig, handler in snapshot.signals.items():
        if signal.getsignal(sig) != handler:
            reasons.append(f"signal handler for {signal.Signals(sig).name} changed")
    now = _config_values()
    for flag, value in snapshot.config.items():
        if now.get(flag) != value:
            reasons.append(f"jax config {flag} changed from {value!r} to {now.get(flag)!r}")
    return reasons


def leftover_threads(snapshot: Snapshot, grace_s: float = 0.2) -> list[str]:
    """Python threads (and child processes) started since ``snapshot`` and still alive."""
    deadline = time.monotonic() + grace_s
    new = [t for t in threading.enumerate() if t.ident not in snapshot.threads and t.is_alive()]
    for t in new:
        t.join(timeout=max(0.0, deadline - time.monotonic()))
    alive = [t for t in new if t.is_alive()]
    reasons = []
    if alive:
        names = ", ".join(sorted(t.name for t in alive)[:5])
        reasons.append(f"{len(alive)} thread(s) started by the candidate still running: {names}")
    kids = _children() - snapshot.children
    if kids:
        reasons.append(f"{len(kids)} child process(es) started by the candidate still running")
    return reasons


def check(snapshot: Snapshot) -> list[str]:
    return tampering(snapshot) + leftover_threads(snapshot)


def restore(snapshot: Snapshot) -> None:
    """Best effort: put back every replaced harness function, remove added names, unhook tracers.

    A worker that ran a tampering candidate is still reported as tainted (jb discards it); this
    keeps the current process usable for its remaining answers (and keeps tests independent).
    """
    for label, owner, space, _ in _namespaces():
        before = snapshot.keys.get(label)
        if before is None:
            continue
        for name in before:
            original = snapshot.functions[f"{label}.{name}"]
            if space.get(name, _MISSING) is not original:
                try:
                    setattr(owner, name, original)
                except (AttributeError, TypeError):
                    pass
        if snapshot.additions.get(label):
            for name in set(space) - before:
                try:
                    delattr(owner, name)
                except (AttributeError, TypeError):
                    pass
    for name, module in snapshot.modules.items():
        if module is not None:
            sys.modules[name] = module
    for fn, (code, defaults, kwdefaults) in snapshot.codes.values():
        target = getattr(fn, "__func__", fn)
        try:
            if target.__code__ is not code:
                target.__code__ = code
            target.__defaults__, target.__kwdefaults__ = defaults, kwdefaults
        except (AttributeError, TypeError, ValueError):
            pass
    sys.settrace(snapshot.trace_hooks[0])
    sys.setprofile(snapshot.trace_hooks[1])
    threading.settrace(snapshot.trace_hooks[2])  # type: ignore[arg-type]
    threading.setprofile(snapshot.trace_hooks[3])  # type: ignore[arg-type]
    for sig, handler in snapshot.signals.items():
        try:
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        except (ValueError, TypeError, OSError):
            pass
    import jax

    for flag, value in snapshot.config.items():
        try:
            if getattr(jax.config, flag) != value:
                jax.config.update(flag, value)
        except Exception:  # noqa: BLE001
            pass


_MISSING = object()


def checksum(inputs) -> list[str]:
    """One digest per input leaf (``deleted`` for a donated/deleted buffer)."""
    import jax

    out = []
    for leaf in jax.tree_util.tree_leaves(inputs):
        if isinstance(leaf, jax.Array):
            if leaf.is_deleted():
                out.append("deleted")
                continue
            host = np.asarray(jax.device_get(leaf))
            out.append(f"{host.dtype}{host.shape}:" + hashlib.blake2b(host.tobytes(), digest_size=16).hexdigest())
        elif isinstance(leaf, np.ndarray):
            out.append(f"{leaf.dtype}{leaf.shape}:" + hashlib.blake2b(leaf.tobytes(), digest_size=16).hexdigest())
        else:
            out.append(repr(leaf))
    return out


def mutation_reasons(before: list[str], after: list[str]) -> list[str]:
    reasons = []
    for i, (b, a) in enumerate(zip(before, after)):
        if a == "deleted" and b != "deleted":
            reasons.append(f"input {i} was donated or deleted by the candidate")
        elif a != b:
            reasons.append(f"input {i} was mutated by the candidate")
    return reasons
