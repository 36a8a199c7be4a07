"""A choice set scored with ARO's / What'sUp's BLIP score (their ``model_zoo/blip_models.py``
``run_scores_batched``: the ITM head's match logit, ``[ENC]`` first in its input, plus the ITC cosine, captions
cut to 35 tokens): ``--model "blip-itm:CKPT?score=itm-logit+itc&max_text_tokens=35&itm_token=..."`` on What'sUp
Controlled A, against that score recomputed from the model's own modules per (image, caption) pair; the tiny
vocabulary has no [ENC], so [MASK] stands in for it. The same run with the model cards' p(match) shares no cache
entry with it."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from PIL import Image
from support.tiny_pair_models import save_blip_itm

from vlbench.tasks.run import run_task
from vlbench.tasks.sets.whatsup import SUBSETS

SETS = [("cat_on_mat", ["a cat on the mat", "a cat near the mat", "a cat in the mat", "a mat on the cat"]),
        ("car_near_bus", ["a car near the bus", "a car on the bus", "a car in the bus", "a bus near the car"]),
        ("dog_in_snow", ["a dog in the snow", "a dog on the snow", "a dog near the snow", "the snow in a dog"]),
        ("man_on_horse", ["a man on a horse", "a man near a horse", "a man in a horse", "a horse on a man"])]
SPEC = "?score=itm-logit+itc&max_text_tokens=35&itm_token=[MASK]"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("aro-blip")
    up = root / "data" / "whatsup"
    rows = [{"image_path": f"data/controlled_images/{name}.png", "caption_options": opts} for name, opts in SETS]
    up.mkdir(parents=True)
    (up / SUBSETS["controlled_a"].file).write_text(json.dumps(rows))
    for k, (name, _) in enumerate(SETS):
        path = up / "controlled_images" / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.random.default_rng(200 + k).integers(0, 256, (28, 36, 3), dtype=np.uint8)).save(path)
    return {"folder": save_blip_itm(root / "blip"), "data": root / "data"}


def _aro_score(folder: Path, image: Path, texts: list[str]) -> np.ndarray:
    """ARO's BLIP score of one image with its caption options, from the model's modules."""
    model = transformers.BlipForImageTextRetrieval.from_pretrained(folder).eval()
    proc = transformers.AutoProcessor.from_pretrained(folder)
    with torch.no_grad():
        t = proc.tokenizer(texts, padding="max_length", truncation=True, max_length=35, return_tensors="pt")
        hidden = model.text_encoder(input_ids=t.input_ids, attention_mask=t.attention_mask).last_hidden_state
        text_embed = torch.nn.functional.normalize(model.text_proj(hidden[:, 0, :]), dim=-1)
        feats = model.vision_model(pixel_values=proc(images=Image.open(image).convert("RGB"),
                                                     return_tensors="pt")["pixel_values"]).last_hidden_state
        image_embed = torch.nn.functional.normalize(model.vision_proj(feats[:, 0, :]), dim=-1)
        ids = t.input_ids.clone()
        ids[:, 0] = proc.tokenizer.convert_tokens_to_ids("[MASK]")
        out = model.text_encoder(input_ids=ids, attention_mask=t.attention_mask,
                                 encoder_hidden_states=feats.repeat(len(texts), 1, 1),
                                 encoder_attention_mask=torch.ones(len(texts), feats.shape[1], dtype=torch.long))
        score = model.itm_head(out.last_hidden_state[:, 0, :])[:, 1] + (image_embed @ text_embed.t())[0]
    return score.numpy().astype(np.float64)


def _rows(out: Path) -> list[dict]:
    with gzip.open(out / "per_item.csv.gz", "rt") as fh:
        return list(csv.DictReader(fh))


def test_whatsup_with_aros_blip_score_equals_its_recomputation(setup, tmp_path):
    cache = str(tmp_path / "cache")
    out = tmp_path / "aro"
    res = run_task(task="whatsup", model=f"blip-itm:{setup['folder']}{SPEC}", dataset="whatsup:controlled_a",
                   data_dir=str(setup["data"]), out=str(out), cache_dir=cache, quiet=True, num_workers=0)
    rows, right = _rows(out), []
    for name, opts in SETS:
        want = _aro_score(setup["folder"], setup["data"] / "whatsup" / "controlled_images" / f"{name}.png", opts)
        (row,) = [r for r in rows if name in r["image"]]
        got = np.array(json.loads(row["scores"]))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
        gaps = want[0] - want[1:]
        assert (np.abs(gaps) > 1e-4).all(), "a near tie in the fixture"
        right.append(bool((gaps > 0).all()))
        assert int(row["correct"]) == right[-1]
    assert res.results["results"][0]["value"] == pytest.approx(100 * np.mean(right))
    assert res.results["model"]["identity"]["score"].startswith("itm logit at index 1 (match) + itc cosine")
    # p(match) is another score: none of the logit+ITC entries is read back for it
    plain = run_task(task="whatsup", model=f"blip-itm:{setup['folder']}", dataset="whatsup:controlled_a",
                     data_dir=str(setup["data"]), out=str(tmp_path / "plain"), cache_dir=cache, quiet=True,
                     num_workers=0)
    assert plain.results["encoding"]["pairs_from_cache"] == 0 and plain.results["encoding"]["pairs_scored"] == 16
    assert plain.results["model"]["hash"] != res.results["model"]["hash"]
