"""The two-stage options refused before any work, each with the fix: a pair scorer given as --model and a dual
encoder as --rerank, --rerank-k without --rerank, K below 1, K above the gallery (refused in the plan, before a
model is loaded)."""

from __future__ import annotations

import pytest

import vlbench
from vlbench.cli import main
from vlbench.errors import OptionError, UnknownNameError


def test_a_pair_scorer_as_model_is_refused_with_the_rerank_route(tiny_manifest):
    with pytest.raises(OptionError, match="blip-itm is a pair scorer") as e:
        vlbench.run(model="blip-itm", dataset=f"custom:{tiny_manifest}")
    assert "--rerank blip-itm with a dual encoder as --model" in e.value.hint


def test_a_dual_encoder_as_rerank_is_refused(tiny_manifest):
    with pytest.raises(OptionError, match="clip is a dual encoder, not a pair scorer") as e:
        vlbench.run(model="clip", dataset=f"custom:{tiny_manifest}", rerank="clip")
    assert "give clip as --model" in e.value.hint and "blip-itm" in e.value.hint


def test_an_unknown_pair_scorer_names_the_known_ones(tiny_manifest):
    with pytest.raises(UnknownNameError, match="blip-itm"):
        vlbench.run(model="clip", dataset=f"custom:{tiny_manifest}", rerank="blip-itn")


@pytest.mark.parametrize("k", [0, -3, 2.5, True])
def test_rerank_k_below_one_or_not_an_integer_is_refused(tiny_manifest, k):
    with pytest.raises(OptionError, match="rerank_k must be an integer >= 1"):
        vlbench.run(model="clip", dataset=f"custom:{tiny_manifest}", rerank="blip-itm", rerank_k=k)


def test_rerank_k_without_rerank_is_refused_on_the_command_line(tiny_manifest, capsys):
    assert main(["run", "--model", "clip", "--dataset", f"custom:{tiny_manifest}", "--rerank-k", "8"]) != 0
    err = capsys.readouterr().err
    assert "--rerank-k is given without --rerank" in err and "add --rerank PAIR_SCORER" in err


def test_rerank_k_above_the_gallery_is_refused_in_the_plan(tiny_manifest, tiny_models, tmp_path, capsys):
    # 12 images with 5 captions each: at most 60 candidates (an image query ranks the 60 captions)
    with pytest.raises(OptionError, match="rerank_k 61 is above the gallery: a query has at most 60 candidates") as e:
        vlbench.run(model=f"clip:{tiny_models('clip')}", dataset=f"custom:{tiny_manifest}", rerank="blip-itm",
                    rerank_k=61, out=str(tmp_path / "r"), quiet=True)
    assert "at most 60" in e.value.hint
    assert not (tmp_path / "r").exists()  # refused before the run's folder was made
