"""Run ``jb eval --json`` on many candidate files and print one Markdown table.

    python -m jb.tools.eval_table --scale tiny examples/adversarial/wrong_*.py candidates/*/*.py
    python -m jb.tools.eval_table --scale cpu --repeat 5 candidates/*/*.py   # stability

A file's workload is its ``# target:`` header line, else the name of its folder (``candidates/
12p_RMSNorm/x.py``); its expected status is its ``# expect:`` line (``correct`` for files under
``candidates/``). Each row gives the status jb gave, whether it is the expected one, the speedup
over XLA (paired, with its 95 % interval; the unpaired ratio of the separate profile steps beside
it), the trust level and the wall time of the ``jb eval`` call.

With ``--repeat N`` every file is evaluated N times with ``--remeasure`` after the first: the row
then gives, for the paired speedup (each run's own measurement) and for the unpaired ratio, the
spread (max - min over the median) and the mean relative width of the paired intervals; the
spread of the speedup jb answers after each run (pooled over the runs so far, with the last
value); and the spread of the hand-tuned kernel's paired speedup over XLA, from the same rounds
(read from the run database in ``$JB_CACHE_DIR``, default ``cache/``).

This is a measuring tool, not a test: it changes nothing and asserts nothing. ``--json FILE`` keeps
every raw ``jb eval --json`` answer.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time


def header(path: pathlib.Path, name: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for _ in range(30):
                line = f.readline()
                if not line:
                    break
                if line.startswith(f"# {name}:"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def target_of(path: pathlib.Path) -> str | None:
    return header(path, "target") or (path.parent.name if "_" in path.parent.name else None)


def expected_of(path: pathlib.Path) -> str:
    return header(path, "expect") or ("correct" if "candidates" in path.parts else "?")


def run_eval(jb: str, path: pathlib.Path, workload: str, scale: str, extra: list[str]) -> tuple[dict, float]:
    cmd = [jb, "eval", "-w", workload, "-k", str(path), "--scale", scale, "--json", *extra]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    try:
        return json.loads(proc.stdout), wall
    except json.JSONDecodeError:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"status": f"jb exit {proc.returncode}", "reasons": tail}, wall


def speedup_of(out: dict) -> tuple[float | None, list | None, float | None]:
    """(this run's paired speedup, its interval, the unpaired ratio)."""
    this = ((out.get("measurement") or {}).get("vs_xla") or {}).get("this_measurement") or {}
    point = this.get("point") if isinstance(this, dict) else None
    ci = [this.get("ci_low"), this.get("ci_high")] if isinstance(this, dict) and this.get("ci_low") is not None else None
    if point is None:
        point, ci = out.get("speedup_vs_xla"), out.get("speedup_ci")
    unpaired = (out.get("speedup_unpaired") or {}).get("vs_xla")
    return point, ci, unpaired


def pooled_of(out: dict) -> float | None:
    """The speedup jb reports after this run (pooled over every measurement of the key)."""
    return ((out.get("measurement") or {}).get("vs_xla") or {}).get("speedup")


def handtuned_vs_xla(out: dict, db: pathlib.Path | None) -> float | None:
    """The hand-tuned kernel's speedup over XLA inside this run's paired measurement: the median
    over rounds of t_xla / t_handtuned (both timed in the candidate's interleaved rounds)."""
    key = (out.get("kernel") or {}).get("key")
    if not key or db is None or not db.is_file():
        return None
    import sqlite3

    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        row = con.execute("select result from actions where key = ?", (key,)).fetchone()
    if not row:
        return None
    rounds = {p["role"]: p.get("round_ms") or [] for p in (json.loads(row[0]).get("paired") or {}).get("programs", [])}
    pairs = [x / h for x, h in zip(rounds.get("xla", []), rounds.get("handtuned", [])) if x and h]
    return statistics.median(pairs) if pairs else None


def fmt(x, digits=3) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def spread(values: list[float]) -> float | None:
    v = [x for x in values if isinstance(x, (int, float))]
    if len(v) < 2:
        return None
    med = statistics.median(v)
    return (max(v) - min(v)) / med if med else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", type=pathlib.Path)
    ap.add_argument("--scale", default="tiny", choices=["tiny", "cpu", "paper"])
    ap.add_argument("--jb", default=os.environ.get("JB_BIN", "target/release/jb"))
    ap.add_argument("--repeat", type=int, default=1, help="evaluations per file (--remeasure after the first)")
    ap.add_argument("--json", type=pathlib.Path, help="write every raw answer here (JSON lines)")
    ap.add_argument("--eval-arg", action="append", default=[], help="extra argument for jb eval (repeatable)")
    args = ap.parse_args(argv)

    raw = open(args.json, "w") if args.json else None
    if args.repeat == 1:
        print("| file | workload | expected | status | ok | speedup (paired, 95% CI) | unpaired | trust | wall s |")
        print("|---|---|---|---|---|---|---|---|---|")
    else:
        print(f"| file | workload | status | paired speedups ({args.repeat} runs) | paired spread | mean CI width | "
              "pooled (jb's answer) spread | hand-tuned vs XLA, paired: spread | "
              "unpaired ratios | unpaired spread | wall s (first, later) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
    cache = os.environ.get("JB_CACHE_DIR")
    db = pathlib.Path(cache) / "jb.sqlite" if cache else pathlib.Path("cache/jb.sqlite")
    mismatches = 0
    for path in args.files:
        workload = target_of(path)
        if workload is None:
            print(f"| {path} | ? | | skipped: no `# target:` line | | | | | |")
            continue
        expected = expected_of(path)
        runs = []
        for i in range(args.repeat):
            extra = list(args.eval_arg) + (["--remeasure"] if i > 0 else [])
            out, wall = run_eval(args.jb, path, workload, args.scale, extra)
            out["_handtuned_vs_xla"] = handtuned_vs_xla(out, db)
            runs.append((out, wall))
            if raw:
                raw.write(json.dumps({"file": str(path), "run": i, "wall_s": wall, "result": out}) + "\n")
                raw.flush()
        name = path.name if "candidates" not in path.parts else f"{path.parent.name}/{path.name}"
        out, wall = runs[0]
        status = out.get("status")
        if args.repeat == 1:
            ok = status == expected
            mismatches += not ok
            point, ci, unpaired = speedup_of(out)
            ci_s = f" [{fmt(ci[0])}, {fmt(ci[1])}]" if ci else ""
            print(f"| {name} | {workload} | {expected} | {status} | {'yes' if ok else '**NO**'} | "
                  f"{fmt(point)}{ci_s} | {fmt(unpaired)} | {out.get('trust') or '-'} | {wall:.1f} |", flush=True)
        else:
            sp = [speedup_of(o) for o, _ in runs]
            points = [p for p, _, _ in sp if p is not None]
            widths = [(c[1] - c[0]) / p for p, c, _ in sp if p and c and None not in c]
            unp = [u for _, _, u in sp if u is not None]
            walls = [w for _, w in runs]
            pooled = [x for x in (pooled_of(o) for o, _ in runs) if x is not None]
            ht = [x for x in (o.get("_handtuned_vs_xla") for o, _ in runs) if x is not None]

            def pct(v):
                return fmt(100 * spread(v), 2) + " %" if spread(v) is not None else "-"

            print(f"| {name} | {workload} | {status} | {', '.join(fmt(p) for p in points)} | "
                  f"{pct(points)} | "
                  f"{fmt(100 * statistics.mean(widths), 2) + ' %' if widths else '-'} | "
                  f"{pct(pooled)} ({fmt(pooled[-1]) if pooled else '-'}) | "
                  f"{pct(ht)} ({', '.join(fmt(x) for x in ht) or '-'}) | "
                  f"{', '.join(fmt(u) for u in unp)} | "
                  f"{fmt(100 * spread(unp), 2) + ' %' if spread(unp) is not None else '-'} | "
                  f"{walls[0]:.1f}, {statistics.mean(walls[1:]):.1f} |", flush=True)
    if raw:
        raw.close()
    if args.repeat == 1:
        print(f"\n{len(args.files) - mismatches} of {len(args.files)} as expected", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
