"""A run's conditions are one frozen type, the steps hand each other values (nothing is patched
afterwards), and validity reads the encode step's own model keys, so its effective rate is right under
--truncate-chars."""

from __future__ import annotations

import dataclasses

import pytest


def _perturbed_texts(ds, names, seed=0):
    from vlbench.perturbations import perturb_captions

    return perturb_captions(ds.captions, ds.caption_ids, names, seed=seed, progress=False)


@pytest.mark.parametrize("chars", [12, 30, None])
def test_effective_rate_under_truncate_chars_equals_an_independent_count(counting_plugin, manifest, tmp_path, chars):
    """The counting model's key is the text itself, so a perturbation is effective on a caption exactly when
    the first ``chars`` characters of the two captions differ: counted here without vlbench's keys."""
    from vlbench import load_dataset, run

    names = ["nearby-char", "distraction-true", "shuffle-all-words"]
    res = run(model="counting", dataset=f"custom:{manifest}", perturb=",".join(names), truncate_chars=chars,
              out=str(tmp_path / "o"), quiet=True, num_workers=0, n_boot=10, validity="off")
    ds = load_dataset(f"custom:{manifest}")
    for name, ps in _perturbed_texts(ds, names).items():
        cut = (lambda t: t[:chars]) if chars else (lambda t: t)
        expected = sum(cut(a) != cut(b) for a, b in zip(ds.captions, ps.texts)) / ds.n_captions
        got = res.results["conditions"][name]["validity"]["effective_rate"]
        assert got == pytest.approx(expected, abs=1e-12), (name, chars)
    if chars == 12:  # "... and true is true" is appended at the end: never seen within 12 characters
        assert res.results["conditions"]["distraction-true"]["validity"]["effective_rate"] == 0.0
        assert res.results["conditions"]["distraction-true"]["validity"]["applicable_rate"] > 0.9


def test_plan_holds_one_kind_of_condition_and_is_frozen(counting_plugin, manifest):
    from vlbench.conditions import RunCondition
    from vlbench.pipeline.run_config import RunConfig
    from vlbench.pipeline.runner import make_plan

    cfg = RunConfig(model="counting", dataset=f"custom:{manifest}", perturb="char-swap",
                    perturb_images="gaussian_noise:1", shortcuts="matched", digits="sklearn-digits", quiet=True)
    plan = make_plan(cfg)
    assert [(c.name, c.kind) for c in plan.conditions] == [
        ("clean", "clean"), ("char-swap", "caption"), ("img:gaussian_noise:1", "image"),
        ("shortcut:matched", "shortcut")]
    assert all(type(c) is RunCondition for c in plan.conditions)
    texts, offsets = plan.texts()
    n = plan.ds.n_captions
    assert offsets["clean"] == 0 and offsets["img:gaussian_noise:1"] == 0  # clean captions, read once
    assert texts[offsets["char-swap"]:offsets["char-swap"] + n] == list(plan.conditions[1].texts)
    assert texts[offsets["shortcut:matched"]:offsets["shortcut:matched"] + n] == list(plan.conditions[3].texts)
    for obj, attr in ((plan, "ds"), (plan.conditions[1], "texts"), (plan.ds, "name")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, attr, None)
    with pytest.raises(TypeError):
        plan.conditions[1].meta["validity"] = {}  # a step cannot write into another step's condition


def test_dataset_name_option_gives_a_new_dataset_not_a_changed_one(counting_plugin, manifest):
    from vlbench.pipeline.run_config import RunConfig
    from vlbench.pipeline.runner import make_plan

    plan = make_plan(RunConfig(model="counting", dataset=f"custom:{manifest}", dataset_name=" mine ", quiet=True))
    assert plan.ds.name == "mine"
