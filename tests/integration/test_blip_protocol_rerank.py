"""BLIP's own retrieval evaluation (salesforce/BLIP train_retrieval.py ``evaluation`` + ``itm_eval``) reimplemented
from its definition on a tiny random-weight ``BlipForImageTextRetrieval``, against ``vlbench run --model blip
--rerank "blip-itm?score=itm-logit+itc&..." --rerank-k K`` on the same checkpoint.

The reimplementation calls the model's own modules as BLIP's loop does: the captions tokenized to a fixed length
(``padding="max_length"``), the ITC features normalised (no temperature), ``sims = image_feats @ text_feats.T``;
per query the top K by ``sims`` (torch.topk), the ITM input with its first token replaced (BLIP's [ENC]; here the
tiny vocabulary's [MASK], given as ``itm_token``), the score ``itm_head(...)[:, 1] + topk_sim``, every other
candidate at -100, then ``np.argsort(score)[::-1]`` and the best positive's place.

Tie rules: vlbench orders equal final scores by first-stage rank (then candidate index) and keeps every candidate
below K in first-stage order; BLIP's reversed argsort (NumPy's default, unstable sort) orders equal scores by
whatever that sort leaves, and puts all candidates below K in one tie at -100. So the two agree on every rank
within K when the top K holds no tie (checked on the data), and a positive below K is below K in both, at places
that may differ (the last test shows such a query). Recall@k for k <= K is equal either way."""

from __future__ import annotations

import csv
import gzip
import json
import re

import numpy as np
import pytest
import torch
import transformers
from PIL import Image
from support.data import write_manifest
from support.tiny_pair_models import save_blip_itm

from vlbench.cli import main
from vlbench.datasets.core import load_dataset
from vlbench.models.pairs import rerank

# BLIP's are K = 128 / 256, 35 tokens and 30 words; smaller here so that the cuts bite on the excerpt's captions
K, TOKENS, WORDS, ITM_TOKEN = 4, 10, 11, "[MASK]"
TEXT = f"max_text_tokens={TOKENS}&pre_caption={WORDS}"
SPEC = f"?score=itm-logit+itc&{TEXT}&itm_token={ITM_TOKEN}"


def _pre_caption(caption: str) -> str:
    """BLIP's dataset step (data/utils.py pre_caption) from its rules: lower case, .!"()*#:;~ to spaces, the
    first WORDS words."""
    return " ".join(re.sub(r'[.!"()*#:;~]', " ", caption.lower()).split()[:WORDS])


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("blipproto")
    folder = save_blip_itm(root / "blip")
    man = write_manifest(root / "data", 6)
    return {"folder": folder, "manifest": man, "ds": load_dataset(f"custom:{man}")}


def _blip_evaluation(folder, images, texts, k):
    """BLIP's ``evaluation``: (score_matrix_i2t, score_matrix_t2i, sims), float32 as BLIP's tensors are."""
    model = transformers.BlipForImageTextRetrieval.from_pretrained(folder).eval()
    proc = transformers.AutoProcessor.from_pretrained(folder)
    tok = proc.tokenizer
    with torch.no_grad():
        t = tok(list(texts), padding="max_length", truncation=True, max_length=TOKENS, return_tensors="pt")
        out = model.text_encoder(input_ids=t.input_ids, attention_mask=t.attention_mask).last_hidden_state
        text_embeds = torch.nn.functional.normalize(model.text_proj(out[:, 0, :]), dim=-1)
        text_ids = t.input_ids.clone()
        text_ids[:, 0] = tok.convert_tokens_to_ids(ITM_TOKEN)
        pix = proc(images=images, return_tensors="pt")["pixel_values"]
        image_feats = model.vision_model(pixel_values=pix).last_hidden_state
        image_embeds = torch.nn.functional.normalize(model.vision_proj(image_feats[:, 0, :]), dim=-1)
        sims = image_embeds @ text_embeds.t()

        def itm(feats, ids, atts):
            att = torch.ones(feats.shape[:-1], dtype=torch.long)
            h = model.text_encoder(input_ids=ids, attention_mask=atts, encoder_hidden_states=feats,
                                   encoder_attention_mask=att).last_hidden_state
            return model.itm_head(h[:, 0, :])[:, 1]

        i2t = torch.full((len(images), len(texts)), -100.0)
        for i, row in enumerate(sims):
            ts, ti = row.topk(k=min(k, len(texts)), dim=0)
            i2t[i, ti] = itm(image_feats[i].repeat(len(ti), 1, 1), text_ids[ti], t.attention_mask[ti]) + ts
        t2i = torch.full((len(texts), len(images)), -100.0)
        for j, row in enumerate(sims.t()):
            ts, ti = row.topk(k=min(k, len(images)), dim=0)
            t2i[j, ti] = itm(image_feats[ti], text_ids[j].repeat(len(ti), 1),
                             t.attention_mask[j].repeat(len(ti), 1)) + ts
    return i2t.numpy(), t2i.numpy(), sims.numpy()


def _itm_eval_ranks(i2t, t2i, c2i):
    """BLIP's ``itm_eval``: each query's best positive's 0-based place in ``np.argsort(score)[::-1]``."""
    img2txt = {i: np.flatnonzero(c2i == i) for i in range(len(i2t))}
    r_i2t = np.array([min(np.where(np.argsort(s)[::-1] == c)[0][0] for c in img2txt[i]) for i, s in enumerate(i2t)])
    r_t2i = np.array([np.where(np.argsort(s)[::-1] == c2i[j])[0][0] for j, s in enumerate(t2i)])
    return {"i2t": r_i2t, "t2i": r_t2i}


def _per_query(out, condition):
    with gzip.open(out / "per_query.csv.gz", "rt") as fh:
        rows = [r for r in csv.DictReader(fh) if r["condition"] == condition]
    return {d: np.array([int(r["best_rank"]) for r in rows if r["direction"] == d]) for d in ("i2t", "t2i")}


def _run(setup, out, k):
    args = ["run", "--model", f"blip:{setup['folder']}?{TEXT}", "--dataset", f"custom:{setup['manifest']}", "--rerank",
            f"blip-itm:{setup['folder']}{SPEC}", "--rerank-k", str(k), "--out", str(out), "--quiet",
            "--num-workers", "0", "--bootstrap", "20", "--validity", "off", "--no-cache"]
    assert main(args) == 0
    return json.loads((out / "results.json").read_text())


@pytest.fixture(scope="module")
def both(setup, tmp_path_factory):
    ds = setup["ds"]
    images = [Image.open(ds.image_path(i)).convert("RGB") for i in range(ds.n_images)]
    i2t, t2i, sims = _blip_evaluation(setup["folder"], images, [_pre_caption(c) for c in ds.captions], K)
    out = tmp_path_factory.mktemp("run") / "r"
    doc = _run(setup, out, K)
    return {"blip": (i2t, t2i, sims), "doc": doc, "vl": _per_query(out, "rerank:clean"),
            "c2i": np.asarray(ds.caption_to_image)}


def _no_tie_within_k(matrix, k, near):
    """True when no query's top k + 1 (by the row's values) holds two values closer than ``near`` (float32 paths
    that sum in another order differ by ~1e-8 on cosines of ~0.1 and ~1e-6 on logits of a few units)."""
    for row in matrix:
        top = np.sort(row)[::-1][:k + 1].astype(np.float64)
        if (np.abs(np.diff(top)) < near).any():
            return False
    return True


def test_blip_protocol_rerank_equals_blips_evaluation_loop(both):
    i2t, t2i, sims = both["blip"]
    assert _no_tie_within_k(sims, K, 1e-7) and _no_tie_within_k(sims.T, K, 1e-7), "a near tie in the first stage"
    assert _no_tie_within_k(i2t, K - 1, 1e-5) and _no_tie_within_k(t2i, K - 1, 1e-5), "a near tie among scores"
    blip = _itm_eval_ranks(i2t, t2i, both["c2i"])
    for d in ("i2t", "t2i"):
        got, want = both["vl"][d], blip[d] + 1  # vlbench's ranks are 1-based
        inside = want <= K
        np.testing.assert_array_equal(got[inside], want[inside])
        assert (got[~inside] > K).all()
        values = {(r["metric"], r["k"]): r["value"] for r in both["doc"]["rerank"]["results"]
                  if r["condition"] == "clean" and r["direction"] == d}
        for k in (1,):  # itm_eval's 100 * mean(rank < k), for k <= K (above K the places below K differ)
            assert values[("recall", k)] == pytest.approx(100.0 * np.mean(blip[d] < k), abs=1e-9)
    # the run is not trivial: the rerank moved some positive (ITM + ITC ranks differently from ITC alone)
    first = _itm_eval_ranks(sims, sims.T, both["c2i"])
    assert any((first[d] != blip[d]).any() for d in ("i2t", "t2i"))


def test_blip_protocol_cuts_bite_on_the_test_captions(setup):
    ds = setup["ds"]
    tok = transformers.AutoProcessor.from_pretrained(setup["folder"]).tokenizer
    assert sum(len(c.split()) > WORDS for c in ds.captions) >= 5  # pre_caption drops words
    assert sum(len(tok(_pre_caption(c))["input_ids"]) > TOKENS for c in ds.captions) >= 5  # then the token cut
    assert any(re.search(r'[.!"()*#:;~]', c) for c in ds.captions)  # and punctuation goes


def test_blip_protocol_options_are_recorded_in_the_rerank_identity(both):
    ident = both["doc"]["rerank"]["pair_scorer"]["identity"]
    assert ident["score"].startswith("itm logit at index 1 (match) + itc cosine")
    assert ident["max_text_tokens"] == TOKENS and ident["itm_first_token"] == 4  # [MASK] in the tiny vocabulary
    assert ident["pre_caption_words"] == WORDS
    assert both["doc"]["rerank"]["pair_scorer"]["name"] == "blip-itm"


def test_blip_below_k_tie_at_minus_100_places_positives_where_vlbench_keeps_first_stage_order():
    # one image query, 6 candidates, K = 2: BLIP puts candidates 2..5 in one tie at -100 and its reversed argsort
    # walks that tie from the highest index down; vlbench keeps them in first-stage (ITC) order
    sims = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4], dtype=np.float32)
    score = np.full(6, -100.0, dtype=np.float32)
    score[:2] = np.array([1.0, 2.0], dtype=np.float32) + sims[:2]
    blip_order = np.argsort(score, kind="stable")[::-1]  # the order NumPy's stable sort gives; its default may differ
    ours = rerank(np.argsort(-sims, kind="stable")[None, :], (score[:2] - sims[:2])[None, :])[0]
    assert list(ours[:2]) == list(blip_order[:2]) == [1, 0]  # within K: the same
    assert list(ours[2:]) == [2, 3, 4, 5] and list(blip_order[2:]) == [5, 4, 3, 2]  # below K: not the same
    # so a positive at candidate 2 has place 3 in vlbench and place 6 in BLIP's itm_eval: both miss R@1 and R@2
