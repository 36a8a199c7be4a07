"""zoom_blur's fast path equals the reference code path at side lengths where it used to differ.

Before the fix, scripts/benchmarks/scan_zoom_blur.py found 116 (shape, severity) mismatches over side lengths 32..1024
(34 distinct side lengths, 0/4/10/19/25 per severity 1-5), all on the last row or column; the sizes below
include several of them and some that never differed.
"""


import numpy as np
import pytest

from vlbench.imageperturb.zoom import _taps, zoom_blur


def _noise(h, w, seed=0):
    return np.random.RandomState(seed).randint(0, 256, (h, w, 3)).astype(np.uint8)


def test_overshooting_last_sample_gets_zero_weight():
    """30 -> 36 samples (zoom 1.2): the last output's coordinate is 35 * (29 / 35) = 29.000000000000004 in
    float64, past the last input sample 29, so scipy's mode='constant' gives it 0; every other output keeps
    its two taps summing to 1."""
    assert 35 * (29 / 35) > 29
    lo, w0, w1 = _taps(30, 36, 36)
    assert (w0[-1], w1[-1]) == (0.0, 0.0)
    assert np.allclose((w0 + w1)[:-1], 1.0)
    lo, w0, w1 = _taps(30, 31, 31)  # 30 * (29 / 30) == 29.0 exactly: interpolated, upper weight 1
    assert lo[-1] == 28 and (w0[-1], w1[-1]) == (0.0, 1.0)


def test_zero_edge_matches_scipy_by_hand():
    """The same overshoot through scipy itself: a constant image enlarged 30 -> 36 ends in a 0 row."""
    from scipy.ndimage import zoom

    z = zoom(np.ones((30, 4, 1), np.float32), (1.2000000000000002, 1, 1), order=1)
    assert z.shape[0] == 36 and z[-1].max() == 0.0 and z[-2].min() == 1.0


@pytest.mark.parametrize("shape", [(36, 32), (32, 71), (78, 139), (285, 40), (40, 646), (136, 136),
                                   (224, 224), (33, 500)])
@pytest.mark.slow  # the reference zoom blur at every size (~1 s CPU)
def test_fast_equals_reference_including_formerly_failing_sizes(shape):
    from vlbench.imageperturb.backend import run_reference

    x = _noise(*shape, seed=shape[0] + shape[1])
    for severity in range(1, 6):
        fast = np.uint8(np.clip(np.asarray(zoom_blur(x, severity), dtype=np.float64), 0, 255))
        ref = run_reference("zoom_blur", x, severity, 0)
        assert np.array_equal(fast, ref), (shape, severity, np.argwhere(fast != ref)[:3].tolist())


def test_formerly_failing_edge_row_is_dark_like_the_reference():
    """White 36 x 32 image, severity 3 (factors 1.00, 1.02, ..., 1.20: 11 layers). Only the last factor,
    1.2000000000000002 in float64, crops ceil(36 / 1.2) = 30 rows and enlarges them to round(30 * 1.2) = 36,
    and its last row overshoots (previous test), so that layer's row 35 is 0: the output row is
    (1 + 10 * 1 + 0) / 12 = 11 / 12 of white = 233.75, truncated to 233; row 34 stays 255."""
    from vlbench.imageperturb.backend import run_reference

    x = np.full((36, 32, 3), 255, np.uint8)
    ref = run_reference("zoom_blur", x, 3, 0)
    fast = np.uint8(np.clip(zoom_blur(x, 3), 0, 255))
    assert (fast[-1] == 233).all() and (fast[:-1] == 255).all()
    assert np.array_equal(fast, ref)
