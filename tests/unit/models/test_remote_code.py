"""Long-text models that ship their own code: ``remote:CHECKPOINT`` loads a checkpoint whose
config.json maps AutoModel to a file in its folder through transformers' real AutoModel path, only with
--trust-remote-code, and records the code, the options and the context length in the model identity."""

from __future__ import annotations

import json

import pytest
import torch
from support.hub_datasets import use_hub_cache
from support.tiny_remote import CONTEXT, hub_code_cache, move_code, save_remote

from vlbench import cli
from vlbench.errors import ModelError
from vlbench.models.remote import fingerprint, load_remote, split_options, text_kwargs


@pytest.fixture(scope="module")
def remote_folder(tmp_path_factory):
    return save_remote(tmp_path_factory.mktemp("remote") / "tiny-dual")


@pytest.mark.slow  # whole runs of the remote-code checkpoint
def test_a_run_loads_the_checkpoints_own_code_only_with_trust_remote_code(remote_folder, manifest, tmp_path,
                                                                           capsys):
    common = ["run", "--model", f"remote:{remote_folder}", "--dataset", f"custom:{manifest}", "--quiet",
              "--num-workers", "0", "--no-cache"]
    code = cli.main([*common, "--out", str(tmp_path / "refused")])
    err = capsys.readouterr().err
    assert code == 2 and "runs Python code shipped with the checkpoint" in err
    assert "modeling_tinydual.py" in err and "--trust-remote-code" in err
    assert not (tmp_path / "refused" / "results.json").exists()

    assert cli.main([*common, "--trust-remote-code", "--out", str(tmp_path / "ok")]) == 0
    res = json.loads((tmp_path / "ok" / "results.json").read_text())
    ident = res["model"]["identity"]
    assert ident["adapter"] == "vlbench.remote" and ident["trust_remote_code"] is True
    assert ident["model_class"] == "TinyDualModel" and ident["api"] == "features"
    assert ident["max_text_tokens"] == CONTEXT  # the model's own context length, recorded
    assert set(ident["code"]) == {"configuration_tinydual.py", "modeling_tinydual.py"}
    assert any(v["metric"] == "recall" for v in res["results"])


@pytest.mark.slow  # loads the remote-code checkpoint three times (~1 s CPU)
def test_options_are_part_of_the_identity_and_both_apis_give_the_models_vectors(remote_folder):
    feats = load_remote(str(remote_folder), trust_remote_code=True)
    prompted = load_remote(f"{remote_folder}?text_prefix=a%20photo%20of%20&max_length=32", trust_remote_code=True)
    enc = load_remote(f"{remote_folder}?api=encode&task=retrieval.query", trust_remote_code=True)
    assert prompted.identity()["options"] == {"text_prefix": "a photo of ", "max_length": 32}
    assert prompted.max_length == 32 and feats.max_length == CONTEXT
    # three different models: every pair differs (a chained a != b != c never compares a with c)
    assert len({feats.model_identity(), prompted.model_identity(), enc.model_identity()}) == 3
    # the prompt is prepended: the prompted vector of "a dog" is the plain vector of "a photo of a dog"
    torch.testing.assert_close(prompted.encode_texts(["a dog"]), feats.encode_texts(["a photo of a dog"]))
    # api=encode calls the model's own encode_text / encode_image (its own tokenisation)
    direct = torch.as_tensor(enc.model.encode_text(["a dog"], task="retrieval.query"))
    torch.testing.assert_close(enc.encode_texts(["a dog"]), direct)


def test_checkpoint_options_are_checked():
    assert split_options("org/m?max_length=248&lowercase=1") == ("org/m", {"max_length": 248, "lowercase": 1})
    assert text_kwargs(split_options("o/m?text_kw=walk_type:long")[1]) == {"walk_type": "long"}
    assert text_kwargs(split_options("o/m?text_kw=walk_short_pos:false")[1]) == {"walk_short_pos": False}
    for bad, what in (("org/m?max_length=1&max_length=2", "given twice"), ("org/m?colour=red", "unknown option"),
                      ("org/m?max_length=x", "is not an integer"), ("org/m?api=magic", "is not one of"),
                      ("org/m?max_length=0", "out of range"), ("org/m?auto=os.system", "not a transformers"),
                      ("org/m?text_kw=long", "NAME:VALUE")):
        with pytest.raises(ModelError, match=what):
            split_options(bad)
    with pytest.raises(ModelError, match="no checkpoint"):
        split_options(None)


def _sha(path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _edit_image_code(path) -> None:
    """The image features of the edited code are twice the old ones (another version of the code)."""
    text = path.read_text()
    assert "return self.pixels(pixel_values.flatten(1))" in text
    path.write_text(text.replace("return self.pixels(pixel_values.flatten(1))",
                                 "return 2 * self.pixels(pixel_values.flatten(1))"))


def test_code_in_another_folder_is_pinned_and_an_edit_changes_the_identity(tmp_path):
    folder, code = save_remote(tmp_path / "ckpt"), tmp_path / "code"
    move_code(folder, str(code), code)  # auto_map: CODE--modeling_tinydual.TinyDualModel
    with pytest.raises(ModelError) as refused:  # the refusal names the code that would run, in its folder
        load_remote(str(folder))
    assert "modeling_tinydual.py" in refused.value.message and str(code) in refused.value.message

    before = load_remote(str(folder), trust_remote_code=True)
    (src,) = before.identity()["code_sources"]
    assert src["folder"] == str(code) and src["commit"].startswith("sha256:")
    assert src["files"]["modeling_tinydual.py"] == _sha(code / "modeling_tinydual.py")
    assert before.identity()["code"] == {}  # the checkpoint folder itself holds no code
    fp_before = fingerprint(str(folder), trust_remote_code=True)
    pixels = torch.rand(2, 3, 32, 32)
    vec_before = before.encode_images(pixels)

    _edit_image_code(code / "modeling_tinydual.py")
    after = load_remote(str(folder), trust_remote_code=True)
    assert after.identity()["code_sources"][0]["commit"] != src["commit"]
    assert after.model_hash() != before.model_hash()
    assert fingerprint(str(folder), trust_remote_code=True) != fp_before  # the cache key moves before loading
    vec_after = after.encode_images(pixels)
    assert not torch.equal(vec_after, vec_before)  # the edited code really ran
    torch.testing.assert_close(vec_after, 2 * vec_before)


@pytest.mark.slow  # saves a checkpoint of its own and loads it twice through transformers' dynamic modules (~1.9 s)
def test_code_in_a_hub_repository_is_pinned_to_its_commit(tmp_path, monkeypatch):
    folder, cache = save_remote(tmp_path / "ckpt"), tmp_path / "hub"
    move_code(folder, "org/tiny-code")  # auto_map: org/tiny-code--modeling_tinydual.TinyDualModel
    use_hub_cache(monkeypatch, cache)
    assert fingerprint(str(folder), trust_remote_code=True) is None  # code not cached: no answer from the cache

    first = "1" * 40
    snap = hub_code_cache(cache, "org/tiny-code", first)
    with pytest.raises(ModelError) as refused:
        load_remote(str(folder))
    assert "modeling_tinydual.py" in refused.value.message and "org/tiny-code" in refused.value.message
    model = load_remote(str(folder), trust_remote_code=True)
    (src,) = model.identity()["code_sources"]
    assert src["repo"] == "org/tiny-code" and src["commit"] == first
    assert src["files"]["modeling_tinydual.py"] == _sha(snap / "modeling_tinydual.py")
    fp_first = fingerprint(str(folder), trust_remote_code=True)
    assert fp_first is not None

    second = "2" * 40  # the code repository moved on: main now points at another commit
    text = (snap / "modeling_tinydual.py").read_text().replace(
        "return self.pixels(pixel_values.flatten(1))", "return 2 * self.pixels(pixel_values.flatten(1))")
    hub_code_cache(cache, "org/tiny-code", second,
                   {"configuration_tinydual.py": (snap / "configuration_tinydual.py").read_text(),
                    "modeling_tinydual.py": text})
    assert fingerprint(str(folder), trust_remote_code=True) != fp_first
    moved = load_remote(str(folder), trust_remote_code=True)
    assert moved.identity()["code_sources"][0]["commit"] == second
    assert moved.model_hash() != model.model_hash()


def test_the_refusal_names_code_a_cached_hub_checkpoint_takes_from_another_repository(tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    use_hub_cache(monkeypatch, cache)
    hub_code_cache(cache, "org/tiny-code", "1" * 40)
    config = {"model_type": "tiny-dual", "auto_map": {"AutoModel": "org/tiny-code--modeling_tinydual.TinyDualModel"}}
    hub_code_cache(cache, "org/tiny-ckpt", "2" * 40, {"config.json": json.dumps(config)})
    with pytest.raises(ModelError) as refused:
        load_remote("org/tiny-ckpt")
    assert "modeling_tinydual.py" in refused.value.message and "org/tiny-code" in refused.value.message
