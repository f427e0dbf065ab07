"""Worker ops: one module per op, each exposing ``run(args: dict) -> dict``."""

from __future__ import annotations

OPS = ("fingerprint", "peak", "describe", "compile", "verify", "profile", "shutdown")
