"""Gallery providers (--gallery) are registered parts (vlbench.registry.galleries): the built-ins, and one
registered from this file that a run then uses without any other module changing. Data: the colour dataset
(tests/conftest.py: 5 solid-colour images in the folder, 3 listed)."""

from __future__ import annotations

import dataclasses

import pytest

from vlbench import registry
from vlbench.errors import OptionError
from vlbench.pipeline.galleries import GALLERIES, GalleryProvider
from vlbench.pipeline.runner import RunConfig, run


def test_the_built_in_providers_are_registered():
    assert list(GALLERIES)[:3] == ["test", "fg-pool", "folder"]
    assert registry.galleries.get("fg-pool").loader_gallery == "fg-pool"
    assert registry.galleries.get("folder").apply is not None and registry.galleries.get("test").apply is None


def _one_more(ds, cfg):
    """The test images plus the first other image of their folder, by name."""
    folder = ds.image_root / "images"
    others = sorted(p.name for p in folder.iterdir() if f"images/{p.name}" not in set(ds.images))
    return dataclasses.replace(ds, distractors=[f"images/{others[0]}"], distractor_root=ds.image_root,
                               gallery="one-more")


@pytest.fixture
def one_more():
    registry.galleries.register("one-more", GalleryProvider("one-more", "test images + one", apply=_one_more),
                                source="plugin:galleries-example 0.1")
    yield "one-more"
    registry.galleries._entries.pop("one-more")


def test_a_provider_registered_elsewhere_is_used_by_a_run(tmp_path, folder_manifest, colour_models, one_more):
    vec, _ = colour_models
    res = run(RunConfig(model=vec, dataset=f"custom:{folder_manifest}", out=str(tmp_path / "run"), gallery=one_more,
                        n_boot=5, quiet=True))
    assert res.results["dataset"]["gallery_size"] == 4  # a, b, c and d.png (the first unlisted image by name)
    assert res.results["settings"]["protocol"]["name"] == "standard+gallery=one-more"
    # the run used the plug-in gallery, and its results say which package and version gave it
    assert res.results["environment"]["plugins"]["galleries/one-more"] == "galleries-example 0.1"


def test_an_unregistered_gallery_is_refused_naming_the_option(tmp_path, folder_manifest):
    with pytest.raises(OptionError) as err:
        run(RunConfig(model="clip", dataset=f"custom:{folder_manifest}", out=str(tmp_path / "r"), gallery="nope"))
    assert err.value.option == "gallery"
