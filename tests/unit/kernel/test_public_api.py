"""The public API of `import vlbench`: every advertised name resolves, lazily (no torch on import), and the
README's examples work with plain NumPy input; values checked against hand-worked ranks."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from support.data import ROOT


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


def test_old_module_paths_are_the_moved_modules_with_a_deprecation_warning(monkeypatch):
    """vlbench/benchmark was split into layers; plug-ins written against the old paths keep working."""
    import importlib

    import pytest

    from vlbench.benchmark import MOVED

    assert len(MOVED) >= 30
    for old, new in MOVED.items():
        monkeypatch.delitem(sys.modules, f"vlbench.benchmark.{old}", raising=False)  # imported by an earlier test
        with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
            mod = importlib.import_module(f"vlbench.benchmark.{old}")
        assert mod is importlib.import_module(new), old
        assert mod.__spec__.name == new  # the alias does not rename the real module
    from vlbench.benchmark.models import ModelAdapter  # the documented plug-in import before #20

    import vlbench

    assert ModelAdapter is vlbench.ModelAdapter


def test_stable_public_names_for_plugins():
    import vlbench

    for name in ("ModelAdapter", "ModelFamily", "Metric", "BasePerturbation", "Dataset", "RunCondition"):
        assert isinstance(getattr(vlbench, name), type), name
