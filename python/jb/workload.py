"""Load a workload module (JAXBench interface) at a given scale.

A workload file defines ``CONFIG``, ``create_inputs(dtype)``, ``workload(*inputs)`` and optionally
``get_flops()``, ``SCALES``, ``TOLERANCE``, ``STATIC_ARGNUMS``, ``META``, ``variants(config)`` (held-out
shape variants: CONFIG overrides relative to the scaled config) and the trial hooks ``TRIALS`` /
``make_trial`` (see jb.inputs). Scales are CONFIG
overrides applied after import: every function of a workload reads ``CONFIG`` at call time.
A plain JAXBench file (no SCALES) runs at its published CONFIG whatever the scale.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import pathlib
import sys
from typing import Any, Callable

SCALES = ("paper", "cpu", "tiny")
DEFAULT_TOLERANCE = {"atol": 1e-2, "rtol": 1e-2}

_counter = itertools.count()


def load_module(path: str | pathlib.Path, name_hint: str = "jb_module"):
    """Import a Python file as a fresh module (never shared with an earlier import)."""
    path = pathlib.Path(path).resolve()
    if path.is_dir():
        path = _workload_file(path)
    name = f"{name_hint}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _workload_file(folder: pathlib.Path) -> pathlib.Path:
    for candidate in ("workload.py", "baseline.py"):
        if (folder / candidate).is_file():
            return folder / candidate
    pys = sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
    if len(pys) == 1:
        return pys[0]
    raise ImportError(f"{folder}: expected workload.py (found {[p.name for p in pys]})")


@dataclasses.dataclass
class Workload:
    """A workload module with its scale applied."""

    name: str
    path: pathlib.Path
    scale: str
    module: Any

    @property
    def config(self) -> dict:
        return self.module.CONFIG

    @property
    def tolerance(self) -> dict:
        tol = dict(DEFAULT_TOLERANCE)
        tol.update(getattr(self.module, "TOLERANCE", {}) or {})
        return tol

    @property
    def static_argnums(self) -> tuple[int, ...]:
        return tuple(getattr(self.module, "STATIC_ARGNUMS", ()) or ())

    @property
    def meta(self) -> dict:
        return dict(getattr(self.module, "META", {}) or {})

    def variants(self) -> list[dict]:
        """Held-out shape variants: CONFIG overrides relative to the scaled config that keep the
        operator's structure ([] when the workload declares none). Each is a non-empty dict of
        existing CONFIG keys."""
        declare = getattr(self.module, "variants", None)
        if not callable(declare):
            return []
        out = declare(dict(self.config))
        if not isinstance(out, (list, tuple)):
            raise TypeError(f"{self.name}: variants() must return a list of dicts, got {type(out).__name__}")
        for override in out:
            if not isinstance(override, dict) or not override:
                raise TypeError(f"{self.name}: a variant must be a non-empty dict, got {override!r}")
            unknown = set(override) - set(self.config)
            if unknown:
                raise ValueError(f"{self.name}: variant {override!r} has unknown CONFIG keys {sorted(unknown)}")
        return [dict(o) for o in out]

    def create_inputs(self, dtype=None):
        import jax.numpy as jnp

        return tuple(self.module.create_inputs(dtype if dtype is not None else jnp.bfloat16))

    @property
    def fn(self) -> Callable:
        return self.module.workload

    def flops(self) -> int | None:
        get = getattr(self.module, "get_flops", None)
        return int(get()) if callable(get) else None

    def jitted(self, fn: Callable | None = None):
        """jax.jit of the workload (or of ``fn`` with the same signature), statics declared."""
        import jax

        return jax.jit(fn or self.fn, static_argnums=self.static_argnums)


def load_workload(path: str | pathlib.Path, scale: str = "paper") -> Workload:
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; expected one of {SCALES}")
    path = pathlib.Path(path)
    module = load_module(path, "jb_workload")
    scales = getattr(module, "SCALES", None) or {}
    if scale in scales:
        module.CONFIG.update(scales[scale])
    name = path.name if path.is_dir() else path.parent.name
    return Workload(name=name, path=path, scale=scale, module=module)
