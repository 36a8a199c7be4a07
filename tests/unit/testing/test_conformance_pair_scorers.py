"""vlbench.testing.check_pair_scorer: the built-in BLIP and BLIP-2 ITM scorers (tiny random-weight models of the
real classes) and a well-formed toy scorer pass; a pair scorer that breaks one clause fails it, and the error names
the scorer and the clause."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from support.conformance import fails_clause
from support.tiny_pair_models import SAVERS, save_blip2_itm

from vlbench.models.pairs import PairScorer
from vlbench.testing import check_pair_scorer

CLAUSES = ["protocol", "identity", "preprocess, collate and encode_images", "score_pairs", "determinism",
           "batch independence", "image encoded alone", "text keys name the text", "scores depend on the pair",
           "mismatched pairs refused", "no pairs"]


@pytest.mark.parametrize("family", sorted(SAVERS))
def test_builtin_pair_scorers_pass(family, tmp_path):
    folder = SAVERS[family](tmp_path / family)
    assert check_pair_scorer(f"{family}:{folder}").passed == CLAUSES


def test_blip2_itm_in_the_older_layout_without_image_tokens_passes(tmp_path):
    folder = save_blip2_itm(tmp_path / "blip2-old", image_tokens=False)
    assert check_pair_scorer(f"blip2-itm:{folder}").passed == CLAUSES


class Toy(PairScorer):
    """A deterministic scorer: the image's mean colour (its state) against a colour read from the text's letters."""

    def identity(self):
        return {"adapter": "toy-pairs", "version": 1}

    def preprocess(self, image):
        return np.asarray(image.convert("RGB").resize((8, 8)), dtype=np.float32) / 255.0

    def collate(self, items):
        return np.stack(list(items))

    def encode_images(self, batch):
        return batch.mean(axis=(1, 2))  # (n, 3)

    def _text_colours(self, texts):
        return np.array([[(sum(map(ord, t)) * (c + 3)) % 97 / 97.0 for c in range(3)] for t in texts],
                        dtype=np.float32).reshape(len(texts), 3)

    def score_pairs(self, images, texts):
        texts = list(texts)
        if len(images) != len(texts):
            raise ValueError(f"{len(images)} image rows for {len(texts)} texts")
        return -np.abs(np.asarray(images, np.float32) - self._text_colours(texts)).sum(axis=1).astype(np.float32)


def test_a_well_formed_toy_scorer_passes():
    assert check_pair_scorer(Toy()).passed == CLAUSES


def _with(**members):
    return type("Broken", (Toy,), members)()


_counter = itertools.count()


def _batch_softmax(self, images, texts):  # a realistic slip: normalising over the pairs of the call
    s = Toy.score_pairs(self, images, texts).astype(np.float64)
    return (np.exp(s) / np.exp(s).sum()).astype(np.float32)


def _order_bias(self, images, texts):
    return Toy.score_pairs(self, images, texts) + np.arange(len(texts), dtype=np.float32) * 1e-3


def _zips(self, images, texts):  # pairs up to the shorter of the two, silently
    n = min(len(images), len(texts))
    return Toy.score_pairs(self, images[:n], list(texts)[:n])


def _text_blind(self, images, texts):
    return -np.asarray(images, np.float32).sum(axis=1)


def _image_blind(self, images, texts):
    return self._text_colours(list(texts)).sum(axis=1)


def _lying_keys(self, texts):
    return ["same"] * len(texts)


def _whole_batch_state(self, batch):  # a state that is not one row per image
    return batch.mean(axis=(0, 1, 2))[None]


BROKEN = [  # (the clause it breaks, how, the scorer)
    ("protocol", "no-score-pairs", _with(score_pairs=None)),
    ("identity", "not-json", _with(identity=lambda self: {"adapter": "toy", "dims": np.arange(2)})),
    ("identity", "changes", _with(identity=lambda self: {"adapter": "toy", "n": next(_counter)})),
    ("identity", "raises", _with(identity=lambda self: 1 / 0)),
    ("preprocess, collate and encode_images", "one-state-row", _with(encode_images=_whole_batch_state)),
    ("score_pairs", "float64", _with(score_pairs=lambda self, i, t: Toy.score_pairs(self, i, t).astype(np.float64))),
    ("score_pairs", "list", _with(score_pairs=lambda self, i, t: Toy.score_pairs(self, i, t).tolist())),
    ("score_pairs", "column", _with(score_pairs=lambda self, i, t: Toy.score_pairs(self, i, t)[:, None])),
    ("score_pairs", "nan", _with(score_pairs=lambda self, i, t: np.full(len(t), np.nan, np.float32))),
    ("determinism", "noisy", _with(score_pairs=lambda self, i, t: Toy.score_pairs(self, i, t)
                                   + np.float32(next(_counter) * 1e-3))),
    ("batch independence", "softmax-over-the-batch", _with(score_pairs=_batch_softmax)),
    ("batch independence", "order-bias", _with(score_pairs=_order_bias)),
    ("text keys name the text", "lying-keys", _with(text_keys=_lying_keys)),
    ("scores depend on the pair", "text-blind", _with(score_pairs=_text_blind)),
    ("scores depend on the pair", "image-blind", _with(score_pairs=_image_blind)),
    ("mismatched pairs refused", "zips-to-the-shorter", _with(score_pairs=_zips)),
]


@pytest.mark.parametrize("clause, how, scorer", BROKEN, ids=[f"{c}-{h}" for c, h, _ in BROKEN])
def test_broken_pair_scorers_fail_their_clause(clause, how, scorer):
    err = fails_clause(check_pair_scorer, scorer, "pair scorer", clause)
    assert "Broken" in str(err)


def test_an_unknown_pair_scorer_name_gets_a_did_you_mean():
    err = fails_clause(check_pair_scorer, "blip-itn", "pair scorer", "protocol")
    assert "blip-itm" in str(err)
