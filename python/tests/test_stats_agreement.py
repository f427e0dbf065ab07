"""python/jb/stats.py and the Rust stats module (src/stats.rs) agree on the median: both check
the same cases (fixtures/stats/median_cases.json; the Rust side in `stats::tests`)."""

import json
import math
import pathlib

from jb import stats

CASES = pathlib.Path(__file__).resolve().parent / "fixtures" / "stats" / "median_cases.json"


def _value(v):
    return float(v) if isinstance(v, str) else v


def test_median_cases():
    for case in json.loads(CASES.read_text())["median"]:
        got = stats.median(_value(v) for v in case["values"])
        want = case["median"]
        if want is None:
            assert got is None, case
        else:
            assert math.isclose(got, want, rel_tol=0, abs_tol=1e-12), (case, got)
