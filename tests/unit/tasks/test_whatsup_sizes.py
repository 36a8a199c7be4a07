"""What'sUp's published sizes: `vlbench ls tasks` names a size for every subset; the pinned Controlled counts are
those the published task scores are whole numbers of; a file with another count is said on the console."""

from __future__ import annotations

import json
from types import SimpleNamespace

from vlbench.cli import main
from vlbench.published.task_scores import entries_for
from vlbench.tasks.sets.whatsup import QA_TOTALS, SIZES, SUBSETS, whatsup_sets


def test_ls_tasks_names_a_size_for_every_whatsup_subset(capsys):
    assert main(["ls", "tasks"]) == 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if "size: 6 subsets" in ln]
    for subset in SUBSETS:
        assert subset in line, subset
    assert "controlled_a 412" in line and "controlled_b 408" in line
    assert "coco_qa_one + coco_qa_two 2,687 together" in line and "vg_qa_one + vg_qa_two 1,451 together" in line
    assert set(SIZES) | {s for pair in QA_TOTALS for s in pair} == set(SUBSETS)


def test_pinned_controlled_sizes_are_the_published_entry_counts():
    (entry,) = entries_for("openclip:ViT-B-32/openai", "whatsup")
    assert {c.rsplit(":", 1)[-1]: w["n_items"] for c, w in entry.sets.items() if w["n_items"]} == SIZES


def test_a_controlled_file_of_another_size_is_said(tmp_path):
    root = tmp_path / "whatsup"
    (root / "controlled_images").mkdir(parents=True)
    rows = [{"image_path": f"data/controlled_images/mug_{p}_table.jpeg",
             "caption_options": [f"A mug {p} a table", "w1", "w2", "w3"]} for p in ("on", "under", "left_of")]
    (root / "controlled_images_dataset.json").write_text(json.dumps(rows))
    for r in rows:
        (root / "controlled_images" / r["image_path"].split("/")[-1]).write_bytes(b"")
    said = []
    cfg = SimpleNamespace(dataset="whatsup:controlled_a", data_dir=str(tmp_path), images_dir=None, dataset_name=None)
    sets = whatsup_sets(cfg, said.append)
    assert len(sets.sets["task:whatsup:controlled_a"]) == 3
    assert said == ["What'sUp controlled_a: 3 items, not the released 412 (a subset or a changed file)"]
