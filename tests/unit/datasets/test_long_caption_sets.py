"""Long-caption test sets: each loads a fixture in its native layout (Urban1k image/ +
caption/*.txt, DOCCI jsonlines with a split field, IIW data.jsonl, DCI per-image JSON + splits.json), its protocol
variant is in its name, and a source whose checksum differs (pinned, or pinned on first use) is refused."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
from PIL import Image

from vlbench.datasets.core import load_dataset
from vlbench.datasets.longcaptions import SETS, SourceFile, load_long_caption_set
from vlbench.errors import DataError
from vlbench.util.io import sha256_file

from support.data import FIXTURES

IIW_ROWS = [json.loads(line) for line in (FIXTURES / "iiw_excerpt.jsonl").read_text().splitlines()][:4]


def _image(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), (10, 20, 30)).save(path)


def test_urban1k_reads_image_and_caption_folders(tmp_path):
    root = tmp_path / "Urban1k"
    for n, text in ((2, "Second photo, a long caption."), (10, "Tenth."), (1, "  First photo.\n")):
        _image(root / "image" / f"{n}.jpg")
        (root / "caption").mkdir(parents=True, exist_ok=True)
        (root / "caption" / f"{n}.txt").write_text(text)
    ds = load_dataset("urban1k", data_dir=tmp_path)
    assert ds.images == ["image/1.jpg", "image/2.jpg", "image/10.jpg"]  # numeric order, as released
    assert ds.captions == ["First photo.", "Second photo, a long caption.", "Tenth."]
    assert ds.source["variant"] == {"text": "caption/*.txt", "split": "all 1,000"}
    (root / "caption" / "11.txt").write_text("no image")
    with pytest.raises(DataError, match="caption 11.txt has no image 11"):
        load_dataset("urban1k", data_dir=tmp_path)


def test_docci_keeps_the_test_split_and_pins_its_file_on_first_use(tmp_path):
    root = tmp_path / "docci"
    rows = [{"example_id": "train_1", "split": "train", "image_file": "train_00001.jpg", "description": "A cat."},
            {"example_id": "test_1", "split": "test", "image_file": "test_00001.jpg", "description": "A red car."},
            {"example_id": "qual_1", "split": "qual_test", "image_file": "qual_1.jpg", "description": "A hat."}]
    root.mkdir()
    (root / "docci_descriptions.jsonlines").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _image(root / "images" / "test_00001.jpg")
    ds = load_dataset("docci", data_dir=tmp_path)
    assert (ds.images, ds.captions) == (["images/test_00001.jpg"], ["A red car."])
    assert ds.source["text"]["pin"] == "pinned on first use"
    assert (root / "docci_descriptions.jsonlines.sha256").read_text().strip() == ds.source["text"]["sha256"]
    with open(root / "docci_descriptions.jsonlines", "a") as fh:  # the file changes after it was pinned
        fh.write(json.dumps({"split": "test", "image_file": "x.jpg", "description": "new"}) + "\n")
    with pytest.raises(DataError, match="expected .* \\(pinned on first use\\)"):
        load_dataset("docci", data_dir=tmp_path)


def _iiw_fixture(tmp_path, set_name="IIW-400"):
    root = tmp_path / "iiw" / set_name
    root.mkdir(parents=True)
    (root / "data.jsonl").write_text("".join(json.dumps({"image/key": r["image_key"], "IIW": r["IIW"]}) + "\n"
                                             for r in IIW_ROWS))
    for r in IIW_ROWS:
        _image(root / "images_aar" / f"{r['image_key']}.jpg")
    return root / "data.jsonl"


def test_iiw_descriptions_and_the_sentence_variant(tmp_path):
    data = _iiw_fixture(tmp_path)
    with pytest.raises(DataError, match="has sha256 .* expected 88809dde73731208... \\(pinned in vlbench\\)"):
        load_dataset("iiw-400", data_dir=tmp_path)  # the fixture is not the released file: refused
    # the readers, on the fixture with its own digest pinned
    for name in ("iiw-400", "iiw-400-sentences"):
        rec = dataclasses.replace(SETS[name], text=SourceFile("data.jsonl", None, sha256_file(data)))
        ds = load_long_caption_set(rec, tmp_path)
        assert ds.images == [f"images_aar/{r['image_key']}.jpg" for r in IIW_ROWS]
        if name == "iiw-400":
            assert ds.captions == [r["IIW"] for r in IIW_ROWS]
        else:  # every sentence a positive of its image, in order, re-joining to the description
            assert ds.n_captions > 4 * 3
            first = [ds.captions[j] for j in ds.captions_of(0)]
            assert " ".join(" ".join(first).split()) == " ".join(IIW_ROWS[0]["IIW"].split())
            assert ds.source["variant"]["unit"] == "sentence"


def test_dci_needs_its_text_variant_and_reads_both(tmp_path):
    root = tmp_path / "dci" / "densely_captioned_images"
    (root / "annotations").mkdir(parents=True)
    (root / "splits.json").write_text(json.dumps({"train": ["0.json"], "test": ["1.json"]}))
    for i in (0, 1):
        (root / "annotations" / f"{i}.json").write_text(json.dumps(
            {"image": f"sa_{i}.jpg", "short_caption": f"Short {i}.", "extra_caption": f"Extra  detail\n{i}."}))
        _image(root / "photos" / f"sa_{i}.jpg")
    with pytest.raises(DataError, match="needs its text variant named"):
        load_dataset("dci", data_dir=tmp_path)
    extra = load_dataset("dci-extra", data_dir=tmp_path)
    both = load_dataset("dci-short-extra", data_dir=tmp_path)
    assert extra.images == both.images == ["photos/sa_1.jpg"]  # the test split only
    assert extra.captions == ["Extra detail 1."] and both.captions == ["Short 1. Extra detail 1."]
    assert extra.content_hash() != both.content_hash()  # two protocols, two datasets


def test_a_missing_set_says_where_to_get_it(tmp_path):
    with pytest.raises(DataError) as info:
        load_dataset("urban1k", data_dir=tmp_path)
    assert "BeichenZhang/Urban1k" in str(info.value)
    with pytest.raises(DataError) as info:
        load_dataset("iiw-400", data_dir=tmp_path)
    assert "raw.githubusercontent.com/google/imageinwords" in str(info.value)


def test_the_released_iiw_files_load_with_their_pinned_checksums(shared_captions, tmp_path):
    for name, fname, n in (("iiw-400", "IIW-400", 400), ("iiw-dci-test", "DCI_Test", 112),
                           ("iiw-docci-test", "DOCCI_Test", 100)):
        folder = tmp_path / "iiw" / fname
        folder.mkdir(parents=True)
        shutil.copy(shared_captions / "iiw" / f"{fname}.jsonl", folder / "data.jsonl")
        ds = load_dataset(name, data_dir=tmp_path, require_images=False)
        assert ds.n_images == n and ds.source["text"]["pin"] == "pinned in vlbench"
        words = sum(len(c.split()) for c in ds.captions) / ds.n_captions
        assert 180 < words < 220  # ~200-word descriptions


@pytest.mark.slow
def test_granularity_of_the_released_iiw_descriptions(shared_captions, language, tmp_path, capsys):
    from vlbench import cli

    for fname in ("DCI_Test", "DOCCI_Test"):
        (tmp_path / "iiw" / fname).mkdir(parents=True)
        shutil.copy(shared_captions / "iiw" / f"{fname}.jsonl", tmp_path / "iiw" / fname / "data.jsonl")
    code = cli.main(["granularity", "--dataset", "iiw-dci-test", "iiw-docci-test", "--data-dir", str(tmp_path),
                     "--out", str(tmp_path / "g"), "--bootstrap", "0"])
    printed = capsys.readouterr().out
    assert code == 0
    for feature in ("Adjectives", "CPs", "Articles", "Quantifiers", "Concept Depth", "Caption Length",
                    "Words per Caption", "Concept Diversity"):
        assert f"| {feature} |" in printed
    table = (tmp_path / "g" / "granularity.csv").read_text().splitlines()
    words = next(line for line in table if line.startswith("words_per_caption")).split(",")[1:]
    assert all(190 < float(w) < 225 for w in words)  # ~200-word descriptions (docs/datasets.md: 210.9, 207.2)


def test_iiw_captions_download_through_the_mirror_and_a_changed_file_is_refused(mirror, tmp_path, capsys):
    from vlbench import cli
    from vlbench.datasets.longcaptions import IIW_RAW

    url = f"{IIW_RAW}/IIW-400/data.jsonl"
    mirror.add_file(url, (FIXTURES / "iiw_excerpt.jsonl").read_bytes())  # not the released file
    code = cli.main(["download", "iiw-400", "--data-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code != 0 and "pinned 88809dde73731208" in err and "nothing was installed" in err
    assert not (tmp_path / "iiw" / "IIW-400" / "data.jsonl").exists()
    assert mirror.gets("IIW-400/data.jsonl")  # fetched from the mirror (VLBENCH_MIRROR), not from GitHub


def test_the_released_iiw_file_downloads_and_loads(mirror, shared_captions, tmp_path, capsys):
    from vlbench import cli
    from vlbench.datasets.longcaptions import IIW_RAW

    mirror.add_file(f"{IIW_RAW}/IIW-400/data.jsonl", (shared_captions / "iiw" / "IIW-400.jsonl").read_bytes())
    assert cli.main(["download", "iiw-400", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "iiw-400: captions" in out and "images are not downloaded by vlbench" in out
    assert load_dataset("iiw-400", data_dir=tmp_path, require_images=False).n_images == 400
