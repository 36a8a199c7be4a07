"""Caption-length budgets: captions cut to B tokens by the model's own tokenizer keep the end
token, never exceed B, are a prefix of the caption's own tokens, and a caption that fits is unchanged; checked on
real ImageInWords descriptions (~200 words) with open_clip's CLIP BPE and with a transformers CLIP tokenizer; a
run with budgets writes one condition per budget and the curve."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.data import FIXTURES

from vlbench.models.budget import cut_to_budget, hf_cutter, openclip_cutter
from vlbench.util.sentences import count_sentences, first_sentences, split_sentences

IIW = [json.loads(line)["IIW"] for line in (FIXTURES / "iiw_excerpt.jsonl").read_text().splitlines()]
SHORT = ["A dog.", "Two people ride bikes on a path."]
BUDGETS = (4, 8, 16, 32, 64, 77)


def _check_cuts(texts, tokenize, budget, cut, lengths, sot, eot):
    for text, new, n in zip(texts, cut, lengths):
        full = tokenize(text)
        assert n == len(full)  # the reported length is the caption's own token count
        if n <= budget:
            assert new == text  # fits: unchanged, character for character
            continue
        ids = tokenize(new)
        assert len(ids) <= budget  # never more than the budget
        assert ids[-1] == eot and (sot is None or ids[0] == sot)  # the end token is kept
        assert ids[:-1] == full[:len(ids) - 1]  # what remains is the caption's own first tokens
        assert len(ids) >= budget - 1  # at most one token given up to keep the text whole


def test_open_clip_bpe_cuts_long_captions_to_each_budget():
    import open_clip
    tok = open_clip.get_tokenizer("ViT-B-32")  # CLIP's BPE vocabulary ships with open_clip

    def tokenize(text):  # the ids the model reads, without padding (id 0 is "!", so padding is cut by length)
        body = tok.encode(text)
        return [tok.sot_token_id, *body, tok.eot_token_id]

    texts = IIW + SHORT
    cuts, lengths = cut_to_budget(texts, BUDGETS, *openclip_cutter(tok))  # each text tokenized once for all
    for budget in BUDGETS:
        cut = cuts[budget]
        _check_cuts(texts, tokenize, budget, cut, lengths, tok.sot_token_id, tok.eot_token_id)
        if budget == 77:  # the model's own context length: open_clip's truncation keeps the same tokens
            for new, text in zip(cut, texts):
                a, b = tok([new])[0].tolist(), tok([text])[0].tolist()
                assert a == b
    assert all(n > 77 for n in cut_to_budget(IIW, [77], *openclip_cutter(tok))[1])  # every IIW caption is cut


def test_a_transformers_tokenizer_cuts_with_the_captions_own_characters(tiny_models):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_models("clip")))

    def tokenize(text):
        return tok(text, verbose=False)["input_ids"]

    texts = IIW + SHORT
    cuts, lengths = cut_to_budget(texts, BUDGETS, *hf_cutter(tok))
    for budget in BUDGETS:
        cut = cuts[budget]
        _check_cuts(texts, tokenize, budget, cut, lengths, tok.bos_token_id, tok.eos_token_id)
        for new, text in zip(cut, texts):
            assert text.startswith(new)  # the caption as written, cut (not its decoded, lower-cased form)


def test_sentences_are_split_by_their_endings():
    text = "A dog runs. It is brown!  Is it happy? Yes"
    assert split_sentences(text) == ["A dog runs.", "It is brown!", "Is it happy?", "Yes"]
    assert first_sentences(text, 2) == "A dog runs. It is brown!" and first_sentences("One only.", 3) == "One only."
    assert count_sentences("no ending at all") == 1 and count_sentences("Version 2.5 is out.") == 1
    counts = [count_sentences(t) for t in IIW]  # the long descriptions: 3 to 14 sentences in this excerpt
    assert min(counts) == 3 and max(counts) == 14 and sum(counts) == 157


@pytest.mark.slow  # a whole run with four budget conditions (~2 s CPU)
def test_a_run_writes_one_condition_per_budget_and_the_curve(tiny_models, manifest, tmp_path):
    from vlbench.pipeline.runner import run

    res = run(model=f"clip:{tiny_models('clip')}", dataset=f"custom:{manifest}", out=str(tmp_path / "run"),
              token_budget=(4, 8, 77), sentence_budget=(1,), quiet=True, num_workers=0, n_boot=20, no_cache=True)
    out = Path(res.out_dir)
    conds = res.results["conditions"]
    assert [c for c in conds if c != "clean"] == ["budget:4", "budget:8", "budget:77", "sentences:1"]
    assert conds["budget:4"]["kind"] == "budget" and conds["budget:4"]["context_length"] == 77
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_models("clip")))
    captions = [c for line in manifest.read_text().splitlines() for c in json.loads(line)["captions"]]
    lengths = [len(tok(c, verbose=False)["input_ids"]) for c in captions]
    for b in (4, 8, 77):  # how many captions each budget cut, counted independently
        assert conds[f"budget:{b}"]["n_cut"] == sum(n > b for n in lengths)
    assert conds["sentences:1"]["n_cut"] == sum(count_sentences(c) > 1 for c in captions)

    def values(name):
        return {(v["direction"], v["metric"], v.get("k")): v["value"] for v in res.results["results"]
                if v["condition"] == name}
    assert values("budget:77") == values("clean")  # no caption of the set is longer than the model reads
    assert res.results["settings"]["options"]["token_budget"] == [4, 8, 77]
    curve = (out / "budget_curve.csv").read_text().splitlines()
    assert curve[0].startswith("unit,budget,condition,direction,n_cut,context_length,R@1")
    assert any(line.startswith("tokens,4,budget:4,t2i") for line in curve)
    assert (out / "budget_curve.png").stat().st_size > 5000
