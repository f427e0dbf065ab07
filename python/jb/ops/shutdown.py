"""``shutdown``: the worker answers, then exits (the loop in jb.worker handles the exit)."""

from __future__ import annotations


def run(args: dict) -> dict:
    return {"status": "ok"}
