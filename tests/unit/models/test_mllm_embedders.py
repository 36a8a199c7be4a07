"""The instruction-conditioned MLLM embedders (vlbench/models/mllm: vlm2vec, gme) on a tiny random-weight
Qwen2VLForConditionalGeneration built offline with its processor (support/tiny_qwen2vl.py) and loaded from its
save_pretrained folder, the path a hub id takes. The reference is the model card's way: the processor on one input
at a time (the instruction written into the family's prompt), the model's own forward, the last token's hidden
state, L2-normalised; ranks by the suite's tie rule (score descending, then index), R@K from the definition."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.data import write_manifest
from support.runs import values_by_k
from support.tiny_qwen2vl import save_tiny_qwen2vl

from vlbench.errors import VlbenchError

FAMILIES = ("vlm2vec", "gme")
CAPTIONS = ["a dog", "two dogs play in the snow near a red car parked near a building", "Cat",
            "a man riding a horse on the beach with an umbrella"]


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory):
    return save_tiny_qwen2vl(tmp_path_factory.mktemp("tiny-qwen2vl") / "model")


def _images(n=4, seed=0):
    from PIL import Image

    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 255, (24 + 9 * i, 30 + 5 * i, 3), dtype=np.uint8)) for i in range(n)]


def _card_processor(folder, fmt):
    """The processor as the cards load it: from the folder, the family's pixel bounds (where it names them)."""
    from transformers import AutoProcessor

    proc = AutoProcessor.from_pretrained(folder)
    if fmt.min_pixels:
        proc.image_processor.size = {"shortest_edge": fmt.min_pixels, "longest_edge": fmt.max_pixels}
    return proc


def _card_vectors(folder, fmt, images, captions, pooling="last"):
    """One input at a time through the processor and ``Qwen2VLForConditionalGeneration.forward``: the last
    token's (or the mean of every token's) final hidden state, L2-normalised (float64)."""
    import torch
    from transformers import Qwen2VLForConditionalGeneration

    model = Qwen2VLForConditionalGeneration.from_pretrained(folder).eval()
    proc = _card_processor(folder, fmt)

    def one(**inputs):
        with torch.no_grad():
            h = model(**proc(return_tensors="pt", **inputs), output_hidden_states=True).hidden_states[-1][0]
        v = (h[-1] if pooling == "last" else h.mean(0)).double().numpy()
        return v / np.linalg.norm(v)

    imgs = [one(text=[fmt.image_prompt(fmt.image_instruction)], images=[im]) for im in images]
    txts = [one(text=[fmt.text_prompt(c, fmt.text_instruction)]) for c in captions]
    return np.stack(imgs), np.stack(txts)


def _rank_of(scores, positives):
    """The best 1-based rank of any positive: candidates by score descending, ties by lower index first."""
    order = sorted(range(len(scores)), key=lambda c: (-scores[c], c))
    return min(order.index(p) + 1 for p in positives)


@pytest.mark.slow  # a tiny Qwen2-VL's forward over a few inputs, or a whole run: seconds of CPU
@pytest.mark.parametrize("family", FAMILIES)
def test_a_run_of_an_mllm_embedder_equals_a_loop_of_the_models_own_forward(tiny_qwen, tmp_path, family):
    from PIL import Image

    from vlbench.models.mllm.formats import FORMATS
    from vlbench.pipeline.runner import run

    man = write_manifest(tmp_path / "data", 5)
    rows = [json.loads(x) for x in man.read_text().splitlines()]
    images = [Image.open(man.parent / r["image"]).convert("RGB") for r in rows]
    captions = [c for r in rows for c in r["captions"]]
    owner = [i for i, r in enumerate(rows) for _ in r["captions"]]
    res = run(model=f"{family}:{tiny_qwen}", dataset=f"custom:{man}", out=str(tmp_path / "run"), quiet=True,
              num_workers=0, n_boot=20, no_cache=True, batch_size=3)

    img, txt = _card_vectors(tiny_qwen, FORMATS[family], images, captions)
    sim = txt @ img.T
    gaps = np.diff(np.sort(sim, axis=1), axis=1)
    assert gaps.min() > 1e-5  # no near tie: the two paths' float noise (about 1e-7) cannot reorder a ranking
    t2i = [_rank_of(sim[j], [owner[j]]) for j in range(len(captions))]
    i2t = [_rank_of(sim[:, i], [j for j, o in enumerate(owner) if o == i]) for i in range(len(images))]
    for direction, ranks in (("t2i", t2i), ("i2t", i2t)):
        got = values_by_k(res, "clean", direction, "recall")
        assert got, f"no recall values for {direction}"
        for k, value in got.items():
            assert value == pytest.approx(100.0 * np.mean([r <= k for r in ranks]), abs=1e-9), (direction, k)
    assert res.record.model.fields["identity"]["adapter"] == f"vlbench.mllm.{family}"


@pytest.mark.parametrize("family", ["vlm2vec", pytest.param("gme", marks=pytest.mark.slow)])  # gme: 256 image tokens
def test_the_adapters_vectors_are_the_cards_forward_within_1e_6(tiny_qwen, family):
    from vlbench.models.adapter import load_model

    model = load_model(f"{family}:{tiny_qwen}", device="cpu")
    images = _images()
    ours_img = model.encode_images(model.collate([model.preprocess(im) for im in images])).numpy()
    ours_txt = model.encode_texts(CAPTIONS).numpy()
    ref_img, ref_txt = _card_vectors(tiny_qwen, model.format, images, CAPTIONS)
    np.testing.assert_allclose(ours_img, ref_img, atol=1e-6)
    np.testing.assert_allclose(ours_txt, ref_txt, atol=1e-6)


@pytest.mark.slow  # a tiny Qwen2-VL's forward over a few inputs, or a whole run: seconds of CPU
def test_mean_pooling_is_the_mean_of_the_final_hidden_states(tiny_qwen):
    from vlbench.models.adapter import load_model

    model = load_model(f"vlm2vec:{tiny_qwen}?pooling=mean", device="cpu")
    images = _images(2)
    ours_img = model.encode_images(model.collate([model.preprocess(im) for im in images])).numpy()
    ours_txt = model.encode_texts(CAPTIONS).numpy()
    ref_img, ref_txt = _card_vectors(tiny_qwen, model.format, images, CAPTIONS, pooling="mean")
    np.testing.assert_allclose(ours_img, ref_img, atol=1e-6)
    np.testing.assert_allclose(ours_txt, ref_txt, atol=1e-6)
    last = load_model(f"vlm2vec:{tiny_qwen}", device="cpu").encode_texts(CAPTIONS).numpy()
    assert np.abs(last - ours_txt).max() > 1e-2  # the option changes the vectors (and the identity, below)


#: a batch's vectors against each input alone: the largest difference allowed (float32 kernels of other shapes)
BATCH_TOLERANCE = 1e-5


@pytest.mark.slow  # a tiny Qwen2-VL's forward over a few inputs, or a whole run: seconds of CPU
@pytest.mark.parametrize("padding", ["left", "right"])
def test_batching_and_the_padding_side_do_not_change_the_vectors(tiny_qwen, padding):
    """Captions and images of different token counts in one padded batch give their vectors alone within
    BATCH_TOLERANCE on either padding side: the pooled token and the positions are read from the attention mask.
    Taking position -1 of a right-padded batch (what a left-padding code path does) would pool a pad token."""
    import torch

    from vlbench.models.adapter import load_model

    model = load_model(f"gme:{tiny_qwen}?padding={padding}", device="cpu")
    batch = model.encode_texts(CAPTIONS).numpy()
    alone = np.concatenate([model.encode_texts([c]).numpy() for c in CAPTIONS])
    assert np.abs(batch - alone).max() <= BATCH_TOLERANCE
    images = _images()
    items = [model.preprocess(im) for im in images]
    assert len({int(x["image_grid_thw"].prod()) for x in items}) > 1  # different image token counts: padding
    batch_img = model.encode_images(model.collate(items)).numpy()
    alone_img = np.concatenate([model.encode_images(model.collate([x])).numpy() for x in items])
    assert np.abs(batch_img - alone_img).max() <= BATCH_TOLERANCE

    tok = model.tokenizer(model.text_prompts(CAPTIONS), padding=True, return_tensors="pt")
    assert (tok["attention_mask"][:, 0 if padding == "left" else -1] == 0).any()  # the batch is really padded
    if padding == "right":
        with torch.no_grad():
            hidden = model.model.model(**tok).last_hidden_state[:, -1].float()
        naive = torch.nn.functional.normalize(hidden, dim=-1).numpy()
        short = int(tok["attention_mask"].sum(1).argmin())
        assert np.abs(naive[short] - alone[short]).max() > 1e-3  # position -1 is a pad token there


def test_the_padding_sides_agree_with_each_other(tiny_qwen):
    from vlbench.models.adapter import load_model

    left = load_model(f"vlm2vec:{tiny_qwen}?padding=left", device="cpu").encode_texts(CAPTIONS).numpy()
    right = load_model(f"vlm2vec:{tiny_qwen}?padding=right", device="cpu").encode_texts(CAPTIONS).numpy()
    assert np.abs(left - right).max() <= BATCH_TOLERANCE


@pytest.mark.slow  # a tiny Qwen2-VL's forward over a few inputs, or a whole run: seconds of CPU
def test_two_instructions_of_one_model_give_two_identities_and_two_cache_entries(tiny_qwen, tmp_path):
    from vlbench.pipeline.runner import run

    man = write_manifest(tmp_path / "data", 3)
    cache = tmp_path / "cache"
    specs = [f"vlm2vec:{tiny_qwen}", f"vlm2vec:{tiny_qwen}?text_instruction=Retrieve the photo of:",
             f"vlm2vec:{tiny_qwen}?image_instruction=Describe this picture."]
    hashes = []
    for i, spec in enumerate(specs):
        res = run(model=spec, dataset=f"custom:{man}", out=str(tmp_path / f"run{i}"), quiet=True, num_workers=0,
                  n_boot=20, cache_dir=str(cache))
        hashes.append(res.record.model.hash)
        prompts = res.record.model.fields["identity"]["prompts"]
        assert prompts["text_instruction"] == ("Retrieve the photo of:" if i == 1 else
                                               "Find me an everyday image that matches the given caption:")
    assert len(set(hashes)) == 3
    entries = sorted(p.name for p in (cache / "embeddings").iterdir() if p.is_dir())
    assert entries == sorted(h[:16] for h in hashes)
    for h in hashes:  # each identity holds the vectors of its own images and captions
        shards = {m.name: len(list(m.glob("*.npz"))) for m in (cache / "embeddings" / h[:16]).iterdir() if m.is_dir()}
        assert shards.get("image", 0) >= 1 and shards.get("text", 0) >= 1, shards
    again = run(model=specs[1], dataset=f"custom:{man}", out=str(tmp_path / "again"), quiet=True, num_workers=0,
                n_boot=20, cache_dir=str(cache))
    assert again.record.model.hash == hashes[1]
    assert len([p for p in (cache / "embeddings").iterdir() if p.is_dir()]) == 3  # warm: no new entry


@pytest.mark.parametrize("spec", ["clip:openai/clip-vit-base-patch32?instruction=Find the image",
                                  "siglip:?text_instruction=Find the image"])
def test_an_instruction_on_a_model_that_takes_none_is_refused_with_the_fix(tmp_path, spec):
    from vlbench.models.adapter import load_model
    from vlbench.pipeline.runner import run

    man = write_manifest(tmp_path / "data", 2)
    for attempt in (lambda: load_model(spec, device="cpu"),
                    lambda: run(model=spec, dataset=f"custom:{man}", out=str(tmp_path / "run"), quiet=True,
                                no_cache=True)):
        with pytest.raises(VlbenchError) as err:
            attempt()
        assert "takes no instruction" in str(err.value)
        assert "vlm2vec" in str(err.value) and "gme" in str(err.value)  # the fix: the families that take one


def test_a_plugin_familys_own_instruction_option_is_left_to_it():
    from vlbench.models.mllm.formats import instruction_refusal

    assert instruction_refusal("my-plugin", "ckpt?instruction=Find it") is None
    assert instruction_refusal("clip", "ckpt?instruction=Find it") is not None
    assert instruction_refusal("clip", "ckpt") is None and instruction_refusal("gme", "ckpt?text_instruction=x") is None


def test_every_option_is_in_the_identity_and_changes_the_model_hash(tiny_qwen):
    from vlbench.models.adapter import load_model

    base = load_model(f"gme:{tiny_qwen}", device="cpu")
    ident = base.identity()
    assert ident["prompts"]["text_instruction"] == "Find an image that matches the given text."
    assert ident["prompts"]["image_instruction"] == "You are a helpful assistant."
    assert ident["pooling"] == "last" and ident["padding_side"] == "left" and ident["normalize"] is True
    assert ident["preprocessing"]["min_pixels"] == 256 * 28 * 28
    assert ident["preprocessing"]["max_pixels"] == 1280 * 28 * 28
    seen = {base.model_hash()}
    for opt in ("text_instruction=Find the photo.", "image_instruction=Represent it.", "pooling=mean",
                "padding=right", "min_pixels=784", "max_pixels=250880", "max_text_tokens=64"):
        seen.add(load_model(f"gme:{tiny_qwen}?{opt}", device="cpu").model_hash())
    assert len(seen) == 8
    assert load_model(f"gme:{tiny_qwen}", device="cpu", precision="bf16").model_hash() not in seen


def test_the_resolution_options_set_the_image_token_count(tiny_qwen):
    from vlbench.models.adapter import load_model

    im = _images(1)[0]
    small = load_model(f"vlm2vec:{tiny_qwen}?min_pixels=784&max_pixels=3136", device="cpu").preprocess(im)
    large = load_model(f"vlm2vec:{tiny_qwen}?min_pixels=50176&max_pixels=50176", device="cpu").preprocess(im)
    # Qwen2-VL resizes so the pixel count lands near [min_pixels, max_pixels] in multiples of 28 x 28
    assert int(small["image_grid_thw"].prod()) * 14 * 14 <= 3136
    assert int(large["image_grid_thw"].prod()) * 14 * 14 >= 50176
    assert large["pixel_values"].shape[0] == int(large["image_grid_thw"].prod())


def test_long_captions_are_read_past_77_tokens_up_to_max_text_tokens(tiny_qwen):
    from vlbench.models.adapter import load_model
    from vlbench.models.mllm.formats import MAX_TEXT_TOKENS

    long = " ".join(["a man riding a horse on the beach near a red car"] * 20)
    model = load_model(f"vlm2vec:{tiny_qwen}", device="cpu")
    n_caption = len(model.tokenizer(long, add_special_tokens=False)["input_ids"])
    assert 77 < n_caption <= MAX_TEXT_TOKENS
    assert model.text_lengths([long])[0] > n_caption  # the whole caption and the instruction
    assert model.text_context_length() == MAX_TEXT_TOKENS
    cut = load_model(f"vlm2vec:{tiny_qwen}?max_text_tokens=40", device="cpu")
    kept = cut._cut([long])[0]
    assert len(cut.tokenizer(kept, add_special_tokens=False)["input_ids"]) == 40 and long.startswith(kept)
    assert cut.text_prompts([long])[0].endswith(kept)  # the caption is cut, never the prompt around it
    assert cut.text_keys([long]) != model.text_keys([long])


@pytest.mark.parametrize("option,words", [("pooling=max", "not one of last, mean"), ("colour=red", "unknown option"),
                                          ("min_pixels=-3", "positive whole number"),
                                          ("min_pixels=5000&max_pixels=800", "above max_pixels"),
                                          ("pooling=last&pooling=mean", "given twice")])
def test_a_bad_option_is_refused_before_loading(option, words):
    from vlbench.models.mllm.encoder import preflight

    problems = preflight(f"/nonexistent/folder?{option}", family="vlm2vec")
    assert len(problems) == 1 and words in problems[0].message and problems[0].hint


def test_a_lora_adapter_folder_is_refused_with_how_to_merge_it(tmp_path):
    from vlbench.models.mllm.encoder import preflight

    (tmp_path / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA"}))
    problems = preflight(str(tmp_path), family="vlm2vec")
    assert len(problems) == 1 and "LoRA adapter" in problems[0].message
    assert "merge_and_unload" in problems[0].hint


def test_an_instruction_may_hold_an_ampersand_written_as_percent_26(tiny_qwen):
    from vlbench.models.mllm.formats import split_options

    _base, fmt = split_options(f"{tiny_qwen}?text_instruction=Find cats %26 dogs:", "vlm2vec")
    assert fmt.text_instruction == "Find cats & dogs:"
    assert fmt.text_prompt("a cat", fmt.text_instruction) == "Find cats & dogs: a cat"
    assert split_options(f"{tiny_qwen}?text_instruction=", "vlm2vec")[1].text_prompt("a cat", "") == "a cat"


@pytest.mark.slow  # a tiny Qwen2-VL's forward over a few inputs, or a whole run: seconds of CPU
def test_an_mllm_embedder_runs_under_a_caption_perturbation_and_an_image_corruption(tiny_qwen, tmp_path):
    from vlbench.pipeline.runner import run

    man = write_manifest(tmp_path / "data", 4)
    res = run(model=f"gme:{tiny_qwen}", dataset=f"custom:{man}", out=str(tmp_path / "run"), quiet=True,
              num_workers=0, n_boot=20, no_cache=True, perturb="char-swap", perturb_images="gaussian_noise")
    conditions = {v.condition for v in res.record.values}
    assert {"clean", "char-swap", "img:gaussian_noise:1", "img:gaussian_noise:5"} <= conditions
    for cond in conditions:
        for direction in ("t2i", "i2t"):
            got = values_by_k(res, cond, direction, "recall")
            assert got and all(0.0 <= v <= 100.0 for v in got.values()), (cond, direction, got)
