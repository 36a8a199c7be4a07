"""Choice tasks under conditions: the perturb hooks on every item type, --perturb-options all vs correct, the
condition plan's refusals, and the flips against a plain NumPy recomputation."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest

from vlbench.errors import VlbenchError
from vlbench.tasks.choice import ChoiceItem, ChoiceRecord
from vlbench.tasks.conditions import SEP, TaskConditions, flips, perturb_sets, plan_conditions
from vlbench.tasks.perturbable import perturb_item, right_candidates
from vlbench.tasks.registry import ChoiceTask, get_task
from vlbench.tasks.run import TaskConfig
from vlbench.tasks.sets.sugarcrepe_pp import TripletItem
from vlbench.tasks.sets.winoground import WinogroundItem


@dataclass(frozen=True)
class PairItem:
    """An item shaped like the sets being added (two images, statements as ``candidates``, no ``correct``)."""

    item_id: str
    images: tuple[str, str]
    candidates: tuple[str, str]

    @property
    def image(self) -> str:
        return self.images[0]


@dataclass(frozen=True)
class OneImageNoCorrect:
    item_id: str
    image: str
    candidates: tuple[str, ...]


def _task(**hooks) -> ChoiceTask:
    return ChoiceTask("t", "a test task", load=lambda cfg, note: None, **hooks)


def test_default_perturb_hook_replaces_the_candidates_of_every_item_type():
    new = {1: "NEW"}
    ci = perturb_item(ChoiceItem("a", "x.png", ("r", "w1", "w2"), 0), new)
    assert ci.candidates == ("r", "NEW", "w2") and ci.image == "x.png" and ci.correct == 0
    wg = perturb_item(WinogroundItem("b", ("i0.png", "i1.png"), ("c0", "c1"), "Object"), new)
    assert wg.captions == ("c0", "NEW") and wg.images == ("i0.png", "i1.png") and wg.tag == "Object"
    tr = perturb_item(TripletItem("c", "x.png", "p1", "p2", "neg"), {0: "P", 2: "N"})
    assert (tr.p1, tr.p2, tr.neg, tr.image) == ("P", "p2", "N", "x.png")
    pair = perturb_item(PairItem("d", ("i0", "i1"), ("s0", "s1")), new)
    assert pair.candidates == ("s0", "NEW") and pair.images == ("i0", "i1")
    same = ChoiceItem("e", "x.png", ("r", "w"), 0)
    assert perturb_item(same, {}) is same


def test_right_candidates_by_item_type_and_a_task_hook():
    assert right_candidates(ChoiceItem("a", "x", ("w", "r", "w2"), 1)) == (1,)
    # each caption of a Winoground pair is the right one of one of its images
    assert right_candidates(WinogroundItem("b", ("i0", "i1"), ("c0", "c1"))) == (0, 1)
    assert right_candidates(PairItem("d", ("i0", "i1"), ("s0", "s1"))) == (0, 1)
    with pytest.raises(VlbenchError) as err:
        right_candidates(OneImageNoCorrect("z", "x", ("a", "b")))
    assert "OneImageNoCorrect" in err.value.message and "right_candidates" in err.value.hint
    assert get_task("sugarcrepe++").right_candidates(TripletItem("c", "x", "p1", "p2", "n")) == (0, 1)


ITEMS = [ChoiceItem("i0", "a.png", ("a dog on a sofa", "a sofa on a dog"), 0),
         ChoiceItem("i1", "b.png", ("a red cup left of a plate", "a red cup right of a plate", "a dog on a sofa"), 1),
         ChoiceItem("i2", "c.png", ("a cat under a chair", "!!!"), 0)]


def _perturbed(which: str, name: str = "distraction-true") -> tuple[list, dict, str]:
    plan = TaskConditions([name], [], which)
    conds, meta = perturb_sets(_task(), {"task:t": ITEMS}, plan, seed=0)
    (cond,) = conds
    return conds[cond], meta[cond], cond


def test_perturb_options_correct_changes_only_the_right_candidate_and_all_changes_every_one():
    right, meta_r, name_r = _perturbed("correct")
    every, meta_a, name_a = _perturbed("all")
    assert name_a == f"task:t{SEP}distraction-true" and name_r == f"task:t{SEP}correct:distraction-true"
    for clean, r, a in zip(ITEMS, right, every):
        for k, text in enumerate(clean.candidates):
            usable = any(ch.isalnum() for ch in text)
            assert (r.candidates[k] != text) == (k == clean.correct and usable)
            assert (a.candidates[k] != text) == usable
        assert r.correct == a.correct == clean.correct
    assert meta_r["perturb_options"] == "correct" and meta_a["perturb_options"] == "all"
    assert meta_r["candidates_changed"] == 3 and meta_a["candidates_changed"] == 6
    # the same text gets the same perturbed text wherever it appears (a candidate of i0 and of i1)
    assert every[0].candidates[0] == every[1].candidates[2]


def test_a_candidate_the_perturbation_does_not_apply_to_stays_and_is_counted():
    every, meta, _ = _perturbed("all", "char-swap")
    assert every[2].candidates[1] == "!!!"
    assert meta["n_not_applicable"] == 1 and meta["n_captions"] == 6  # distinct texts asked: 6 of 7 candidates
    assert meta["not_applicable_rate"] == pytest.approx(1 / 6)
    assert meta["perturbation"] == "char-swap" and meta["family"] == "typos" and meta["condition_kind"] == "caption"


def test_winoground_correct_is_every_caption():
    items = [WinogroundItem("w", ("i0.png", "i1.png"), ("a dog chases a cat", "a cat chases a dog"))]
    plan = {w: TaskConditions(["distraction-false"], [], w) for w in ("all", "correct")}
    out = {w: perturb_sets(get_task("winoground"), {"task:winoground": items}, p, 0)[0] for w, p in plan.items()}
    assert list(out["all"].values())[0] == list(out["correct"].values())[0]
    assert all(c.endswith("and false is false") for c in list(out["all"].values())[0][0].captions)


def _cfg(**kw):
    base = dict(perturb=None, perturb_options=None, perturb_params={}, perturb_images=None, seed=0,
                corrupt_at="input", corrupt_backend="reference")
    return SimpleNamespace(**{**base, **kw})


def test_condition_options_are_checked_before_any_data():
    with pytest.raises(VlbenchError, match="--perturb-options needs --perturb"):
        plan_conditions(_cfg(perturb_options="correct"))
    with pytest.raises(VlbenchError, match="--perturb-options 'some'"):
        plan_conditions(_cfg(perturb="typos", perturb_options="some"))
    with pytest.raises(VlbenchError, match="unknown perturbation"):
        plan_conditions(_cfg(perturb="typoz"))
    with pytest.raises(VlbenchError, match="synonym-noun"):
        plan_conditions(_cfg(perturb="typos", perturb_params={"synonym-noun": {"choice": "random"}}))
    with pytest.raises(VlbenchError, match="unknown image perturbation"):
        plan_conditions(_cfg(perturb_images="gaussian_nois:3"))
    plan = plan_conditions(_cfg(perturb="typos", perturb_images="gaussian_noise:1-2"))
    assert plan.captions == ["char-swap", "missing-char", "extra-char", "nearby-char"] and plan.which == "all"
    assert [v.name for v in plan.images] == ["img:gaussian_noise:1", "img:gaussian_noise:2"]
    assert not plan_conditions(_cfg())


def test_task_config_takes_the_condition_options_and_still_refuses_retrieval_ones():
    cfg = TaskConfig(task="order", model="clip", perturb="typos", perturb_images="all:3", perturb_options="correct",
                     corrupt_at="original", perturb_params={"char-swap": {"edits": 2}})
    assert cfg.perturb_params == {"char-swap": {"edits": 2}} and cfg.perturb_options == "correct"
    assert TaskConfig(task="order", model="clip").perturb_params == {}
    with pytest.raises(VlbenchError, match="--mce-reference"):
        TaskConfig(task="order", model="clip", mce_reference="runs/x")


def _result(correct: list[bool]):
    return SimpleNamespace(records=[ChoiceRecord(f"i{k}", "x", 0, c, [0.0]) for k, c in enumerate(correct)])


def test_flips_equal_a_plain_recomputation():
    rng = np.random.default_rng(3)
    a = rng.random(57) < 0.6
    b = np.where(rng.random(57) < 0.3, ~a, a)
    got = flips(_result(list(a)), _result(list(b)), seed=11, n_boot=1000)
    assert got["hit_to_miss"] == int(np.sum(a & ~b)) and got["miss_to_hit"] == int(np.sum(~a & b))
    d = (b.astype(float) - a.astype(float)) * 100
    assert got["delta"] == pytest.approx(d.mean(), abs=1e-12) and got["n"] == 57
    # the paired percentile bootstrap: items resampled with replacement, one generator seeded by the run's seed
    draws = np.random.default_rng(11).integers(0, 57, size=(1000, 57))
    means = d[draws].mean(axis=1)
    assert got["ci_low"] == pytest.approx(np.percentile(means, 2.5), abs=1e-9)
    assert got["ci_high"] == pytest.approx(np.percentile(means, 97.5), abs=1e-9)
    with pytest.raises(VlbenchError):
        flips(_result([True, False]), SimpleNamespace(records=list(reversed(_result([True, False]).records))), 0, 10)


def test_a_tasks_prompt_prefix_is_kept_and_only_the_caption_after_it_is_perturbed():
    """MMVP gives the model "a photo of " + statement: a typo or a shuffle must change the statement, never the
    template (the template is the task's protocol, not the caption under test)."""
    from vlbench.tasks.sets.mmvp import PROMPT, MMVPItem

    mmvp = get_task("mmvp")
    assert mmvp.prompt == PROMPT
    items = [MMVPItem("p", ("i0", "i1"), (PROMPT + "the dog is facing left", PROMPT + "the dog is facing right"))]
    for name in ("shuffle-all-words", "char-swap", "distraction-true"):
        (out,) = perturb_sets(mmvp, {"task:mmvp": items}, TaskConditions([name], [], "all"), 0)[0].values()
        for clean, new in zip(items[0].candidates, out[0].candidates):
            assert new.startswith(PROMPT) and new != clean, (name, new)
    # the same perturbation of the bare statement, without the task's template, gives the same words after it
    bare = [ChoiceItem("q", "x.png", tuple(c[len(PROMPT):] for c in items[0].candidates), 0)]
    (plain,) = perturb_sets(_task(), {"task:t": bare}, TaskConditions(["shuffle-all-words"], [], "all"), 0)[0].values()
    (pref,) = perturb_sets(mmvp, {"task:mmvp": items}, TaskConditions(["shuffle-all-words"], [], "all"), 0)[0].values()
    assert [PROMPT + c for c in plain[0].candidates] == list(pref[0].candidates)


def test_the_change_of_a_macro_accuracy_is_the_reported_accuracies_difference():
    """ARO's accuracy is a mean over relations, not over items: its recorded change must be the difference of
    the two reported accuracies (the items' change is kept beside it, with the interval it belongs to)."""
    rec = lambda ok: [ChoiceRecord(f"i{k}", "x", 0, bool(v), [0.0]) for k, v in enumerate(ok)]  # noqa: E731
    clean_ok, pert_ok = [1, 1, 1, 0], [1, 0, 1, 0]
    clean = SimpleNamespace(accuracy=80.0, records=rec(clean_ok))  # macro: not 75
    pert = SimpleNamespace(accuracy=40.0, records=rec(pert_ok))  # macro: not 50
    f = flips(clean, pert, seed=0, n_boot=200)
    assert f["delta"] == pytest.approx(-40.0) and f["item_delta"] == pytest.approx(-25.0)
    assert (f["hit_to_miss"], f["miss_to_hit"]) == (1, 0) and "micro" in f["interval_of"]
    # an item-mean accuracy keeps the one change
    g = flips(SimpleNamespace(accuracy=75.0, records=rec(clean_ok)), SimpleNamespace(accuracy=50.0, records=rec(pert_ok)),
              seed=0, n_boot=200)
    assert g["delta"] == pytest.approx(-25.0) and "item_delta" not in g
