"""vlbench.testing.check_dataset: a custom manifest dataset passes (as a Dataset, a factory and by name), the built-in
datasets pass on their real caption files (no images: those are not here); a dataset that breaks one clause fails
it, and the error names it and the clause."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from vlbench.datasets.core import load_custom
from vlbench.datasets.specs import BUILTIN
from vlbench.testing import ConformanceError, check_dataset

ALL_CHECKS = ["loads", "images", "captions", "caption ids", "caption issues reported", "gallery", "description",
              "loads the same twice", "image files"]


def test_a_manifest_dataset_passes_by_name_factory_and_object(manifest):
    assert check_dataset(f"custom:{manifest}").passed == ALL_CHECKS
    factory = lambda **kw: load_custom(str(manifest), require_images=kw["require_images"])  # noqa: E731
    assert check_dataset(factory).passed == ALL_CHECKS
    report = check_dataset(load_custom(str(manifest)))
    assert "loads the same twice" in report.skipped and report.passed[-1] == "image files"


#: the MS-COCO 5k sets (25,000 captions, loaded twice: about a second each) are in the slow lane
BIG = {n for n, s in BUILTIN.items() if s.images == "coco"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in BIG else n for n in BUILTIN])
def test_every_builtin_dataset_passes_on_its_caption_file(name, shared_captions):
    spec = BUILTIN[name]
    if not ((shared_captions / spec.captions).is_file() or (shared_captions / spec.captions.split("/")[-1]).is_file()):
        pytest.skip(f"{spec.captions} is not in {shared_captions}")
    report = check_dataset(name, data_dir=shared_captions, require_images=False)
    assert report.passed == ALL_CHECKS[:-1] and report.skipped == {"image files": "require_images=False"}


def _broken(ds, clause):
    c2i = np.asarray(ds.caption_to_image)
    ids = list(ds.caption_ids)
    variants = {
        "no-images": ("images", replace(ds, images=[], caption_to_image=c2i[:0], captions=[], caption_ids=[])),
        "image-twice": ("images", replace(ds, images=ds.images[:-1] + ds.images[:1])),
        "caption-index-out-of-range": ("captions", replace(ds, caption_to_image=np.where(c2i == 0, 99, c2i))),
        "image-without-caption": ("captions", replace(ds, caption_to_image=np.where(c2i == 0, 1, c2i))),
        "caption-index-floats": ("captions", replace(ds, caption_to_image=c2i.astype(float))),
        "repeated-caption-id": ("caption ids", replace(ds, caption_ids=ids[:1] + ids[:-1])),
        "empty-caption-unreported": ("caption issues reported", replace(ds, captions=[""] + list(ds.captions[1:]))),
        "distractor-is-a-test-image": ("gallery", replace(ds, distractors=ds.images[:1])),
        "overlapping-folds": ("gallery", replace(ds, folds=[np.arange(3), np.arange(2, 5)])),
        "extra-positives-unnamed": ("gallery", replace(ds, extra_positives={"t2i": {0: [1]}})),
        "source-not-json": ("description", replace(ds, source={"path": object()})),
        "image-file-missing": ("image files", replace(ds, images=ds.images[:-1] + ["gone.png"])),
    }
    return variants[clause]


@pytest.mark.parametrize("how", ["no-images", "image-twice", "caption-index-out-of-range", "image-without-caption",
                                 "caption-index-floats", "repeated-caption-id", "empty-caption-unreported",
                                 "distractor-is-a-test-image", "overlapping-folds", "extra-positives-unnamed",
                                 "source-not-json", "image-file-missing"])
def test_a_broken_dataset_fails_the_clause_it_breaks(how, manifest):
    clause, ds = _broken(load_custom(str(manifest)), how)
    with pytest.raises(ConformanceError) as err:
        check_dataset(ds)
    assert (err.value.kind, err.value.plugin, err.value.check) == ("dataset", ds.name, clause)


def test_a_factory_that_returns_no_dataset_or_another_one_each_time_fails(manifest):
    with pytest.raises(ConformanceError) as err:
        check_dataset(lambda **kw: json.loads(manifest.read_text().splitlines()[0]))
    assert err.value.check == "loads" and "Dataset" in err.value.expected
    calls = []

    def drifting(**kw):  # a different caption order on every load
        calls.append(1)
        ds = load_custom(str(manifest))
        return replace(ds, captions=list(np.roll(ds.captions, len(calls))))

    with pytest.raises(ConformanceError) as err:
        check_dataset(drifting)
    assert err.value.check == "loads the same twice"
