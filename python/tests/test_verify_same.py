"""Two runs of a deterministic kernel agree even where its outputs are infinite or NaN (issue 27:
"two runs on the same inputs differ (max abs diff inf)" on a deterministic kernel)."""

import numpy as np

from jb.ops.verify import _same


def test_equal_infinities_and_nans_are_the_same_output():
    a = np.array([1.0, np.inf, -np.inf, np.nan], np.float32)
    assert _same(a, a.copy(), True, True) == (True, 0.0)


def test_a_changed_value_still_differs():
    a = np.array([1.0, np.inf, -np.inf, np.nan], np.float32)
    b = a.copy()
    b[0] = 1.5
    assert _same(a, b, True, True) == (False, 0.5)
    b = a.copy()
    b[1] = 3.0  # inf against a finite value: infinitely far
    same, worst = _same(a, b, True, True)
    assert not same and worst == np.inf
    b = a.copy()
    b[3] = 0.0  # NaN against a number
    assert not _same(a, b, True, True)[0]
