"""Everything vlbench reports is a registered metric, listed by ``vlbench ls metrics``.

Self-contained: it makes the kinds of runs vlbench has (retrieval with caption perturbations, graded relevance,
gallery distractors, fraction recall on one side; the order and SugarCrepe++ choice tasks), reads their
results.json files back and checks each reported metric name against ``vlbench ls metrics``. Metric plug-ins
that a run recorded as used (``environment.plugins``) are the only names allowed to be missing.
"""

from __future__ import annotations

import json
import shutil

import numpy as np

from vlbench import __version__
from vlbench.cli import main
from vlbench.results import SCHEMA_VERSION
from vlbench.util.io import read_regular_file

from support.data import FIXTURES, write_images, write_manifest


def _listed(capsys) -> set[str]:
    assert main(["ls", "metrics"]) == 0
    lines = capsys.readouterr().out.split("metrics (name, unit, range, better, directions):")[1].splitlines()
    return {line.split()[0].split("@")[0] for line in lines if line.startswith("  ")}


def _run_results(root) -> list[tuple[str, dict]]:
    out = []
    for path in sorted(root.rglob("results.json")):
        doc = json.loads(read_regular_file(path, 64 * 2**20).decode("utf-8"))
        assert doc.get("vlbench_version") == __version__ and str(doc.get("schema_version")) == str(SCHEMA_VERSION)
        assert "environment" in doc and isinstance(doc.get("results"), list), path
        out.append((str(path), doc))
    return out


def _sugarcrepe_pp_data(root):
    """The official-format fixture files and one synthetic image per file name they use."""
    from PIL import Image

    shutil.copytree(FIXTURES / "sugarcrepe_pp", root / "data" / "sugarcrepe_pp")
    images = root / "val2017"
    images.mkdir()
    for f in (FIXTURES / "sugarcrepe_pp").glob("*.json"):
        for row in json.loads(f.read_text()):
            rng = np.random.default_rng(int(row["filename"].split(".")[0]))
            Image.fromarray(rng.integers(0, 256, (20, 24, 3), dtype=np.uint8)).save(images / row["filename"])
    return root / "data", images


def test_every_metric_of_every_kind_of_run_is_listed(tmp_path, counting_plugin, capsys):
    from vlbench import run
    from vlbench.tasks.run import run_task

    man = write_manifest(tmp_path / "data", 6)
    write_images(tmp_path / "neg", 3, seed=7)
    (tmp_path / "adv.txt").write_text("a dog runs on the grass\na red car\n")
    runs = tmp_path / "runs"
    kw = dict(model="counting", dataset=f"custom:{man}", quiet=True, num_workers=0, n_boot=10)
    run(out=str(runs / "a"), perturb="nearby-char", graded=("rouge-l",), **kw)
    run(out=str(runs / "b"), i2t_recall="fraction", perturb="nearby-char", perturb_side="t2i", **kw)
    run(out=str(runs / "c"), distractors=f"images:{tmp_path / 'neg'},captions:{tmp_path / 'adv.txt'}",
        validity="off", **kw)
    assert main(["run", "--task", "order", "--model", "counting", "--dataset", f"custom:{man}",
                 "--out", str(runs / "order"), "--quiet", "--num-workers", "0"]) == 0
    data, images = _sugarcrepe_pp_data(tmp_path)
    subsets = ",".join(sorted(p.stem for p in (data / "sugarcrepe_pp").glob("*.json")))
    run_task(task="sugarcrepe++", model="counting", dataset=f"sugarcrepe++:{subsets}", data_dir=str(data),
             images_dir=str(images), out=str(runs / "scpp"), quiet=True, num_workers=0)

    found = _run_results(runs)
    assert len(found) == 5
    reported = {r["metric"] for _, doc in found for r in doc["results"]}
    # each kind of run reported what it is for (so the check below covers every kind)
    assert {"recall", "rsum", "ndcg_rouge_l", "false_rate", "accuracy", "p1_accuracy", "tot_accuracy"} <= reported
    listed = _listed(capsys)
    missing = {}
    for path, doc in found:
        plugins = {k.split("/", 1)[1] for k in (doc["environment"].get("plugins") or {}) if k.startswith("metrics/")}
        for name in {r["metric"] for r in doc["results"]} - listed - plugins:
            missing.setdefault(name, path)
    assert missing == {}, f"reported but not listed by `vlbench ls metrics`: {missing}"
