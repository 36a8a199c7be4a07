"""The public API of `import vlbench`: every advertised name resolves, lazily (no torch on import), and the
README's examples work with plain NumPy input; values checked against hand-worked ranks."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from conftest import ROOT


def test_every_public_name_resolves():
    import vlbench

    for name in vlbench.__all__:
        assert getattr(vlbench, name) is not None, name
    assert {"run", "evaluate", "score", "load_results", "RunConfig", "ModelAdapter", "Dataset",
            "BasePerturbation", "granularity_table", "Metric", "RunRecord", "MetricKey"} <= set(dir(vlbench))


def test_import_vlbench_does_not_import_torch():
    code = ("import sys, vlbench; vlbench.__all__; vlbench.granularity; vlbench.RunConfig; "
            "print(any(m == 'torch' or m.startswith('torch.') for m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_score_and_evaluate_take_a_numpy_array():
    import vlbench

    # 2 images, 4 captions (captions 0,1 of image 0; 2,3 of image 1). Text->image: caption 1 scores image 1
    # higher (0.8 > 0.1), the others their own image -> R@1 = 3/4. Image->text: image 0's best caption is 2
    # (0.95, image 1's: a miss), image 1's best is caption 2 (0.96, a hit) -> R@1 = 1/2.
    sim = np.array([[0.9, 0.1, 0.95, 0.2],
                    [0.1, 0.8, 0.96, 0.7]])
    c2i = [0, 0, 1, 1]
    flat = vlbench.score(sim, c2i, k=(1,))
    ev = vlbench.evaluate(vlbench.ArraySource(sim), c2i, k=(1,))
    got = {(r["direction"], r["metric"], r["k"]): r["value"] for r in ev.records()}
    assert got[("t2i", "recall", 1)] == 75.0 and got[("i2t", "recall", 1)] == 50.0
    assert flat["t2i_recall@1"] == 75.0 and flat["i2t_recall@1"] == 50.0


def test_granularity_is_reachable_after_import_vlbench():
    import vlbench

    assert callable(vlbench.granularity.granularity_table)
