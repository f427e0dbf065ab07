"""``fingerprint``: the environment a result depends on (part of cache keys: keep it stable)."""

from __future__ import annotations

import importlib.metadata
import os
import platform

import jax


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def run(args: dict) -> dict:
    devices = jax.devices()
    plugins = {
        name: v
        for name in ("libtpu", "jax-cuda12-plugin", "jax-cuda13-plugin", "jax-cuda12-pjrt", "jax-rocm-plugin")
        if (v := _version(name)) is not None
    }
    return {
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": _version("jaxlib"),
        "tokamax": _version("tokamax"),
        "numpy": _version("numpy"),
        "backend": jax.default_backend(),
        "device_kind": devices[0].device_kind if devices else None,
        "device_count": len(devices),
        "platform_version": getattr(devices[0].client, "platform_version", None) if devices else None,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "plugins": plugins,
        "machine": platform.machine(),
    }
