"""Long-text models that ship their own code (issue #33 item 3): ``remote:CHECKPOINT`` loads a checkpoint whose
config.json maps AutoModel to a file in its folder through transformers' real AutoModel path, only with
--trust-remote-code, and records the code, the options and the context length in the model identity."""

from __future__ import annotations

import json

import pytest
import torch

from vlbench import cli
from vlbench.errors import ModelError
from vlbench.models.remote import load_remote, split_options, text_kwargs

from support.tiny_remote import CONTEXT, save_remote


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
    assert feats.model_identity() != prompted.model_identity() != enc.model_identity()
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
