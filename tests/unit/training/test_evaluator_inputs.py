"""What the training Evaluator refuses before any work: a model given at construction, options that do not
apply to it, and a model it cannot wrap (each a vlbench error naming the fix)."""

from __future__ import annotations

import pytest

from vlbench.errors import ModelError, OptionError


def test_evaluator_refuses_a_model_option_and_resume():
    from vlbench.training import Evaluator

    with pytest.raises(OptionError) as e:
        Evaluator("custom:x.jsonl", model="clip")
    assert e.value.option == "model"
    with pytest.raises(OptionError) as e:
        Evaluator("custom:x.jsonl", resume=True)
    assert e.value.option == "resume"


def test_an_object_that_is_no_model_is_refused_with_the_fix():
    from vlbench.training.adapters import as_adapter

    with pytest.raises(ModelError) as e:
        as_adapter(object())
    assert "ModelAdapter" in e.value.hint


def test_an_open_clip_model_without_its_tokenizer_is_refused():
    from vlbench.training.adapters import as_adapter

    class Fake:
        def encode_image(self, x): ...

        def encode_text(self, x): ...

        def parameters(self):
            return iter(())

    with pytest.raises(ModelError) as e:
        as_adapter(Fake(), preprocess=lambda im: im)
    assert "tokenizer" in e.value.hint


def test_evaluator_out_that_is_a_file_is_refused_before_any_work(tmp_path, monkeypatch):
    """Issue 44: an ``out`` that is a file was accepted and the first call failed with NotADirectoryError after the
    plan was made; it is an OptionError naming ``out`` when the Evaluator is built, before the dataset is read."""
    from vlbench.pipeline import runner
    from vlbench.training import Evaluator

    monkeypatch.setattr(runner, "make_plan", lambda *a, **k: pytest.fail("the plan was made before out was checked"))
    (tmp_path / "notes.txt").write_text("mine")
    for out in (tmp_path / "notes.txt", tmp_path / "notes.txt" / "evals"):
        with pytest.raises(OptionError) as e:
            Evaluator("custom:x.jsonl", out=str(out))
        assert e.value.option == "out" and "notes.txt' is a file" in e.value.message
        assert (tmp_path / "notes.txt").read_text() == "mine"


def test_evaluator_call_refuses_a_finished_step_folder_before_encoding(tmp_path):
    import json

    from support.data import write_manifest

    from vlbench import ModelAdapter
    from vlbench.errors import VlbenchError
    from vlbench.training import Evaluator

    class NeverEncodes(ModelAdapter):
        name = "never"

        def identity(self):
            return {"adapter": "never"}

        def encode_images(self, batch):
            pytest.fail("encoded although the call's folder holds a finished run")

        encode_texts = encode_images

    man = write_manifest(tmp_path / "d", 3)
    evaluator = Evaluator(f"custom:{man}", out=str(tmp_path / "evals"), num_workers=0, validity="off")
    (tmp_path / "evals" / "step-5").mkdir(parents=True)
    (tmp_path / "evals" / "step-5" / "results.json").write_text(json.dumps({"run_id": "x"}))
    with pytest.raises(VlbenchError, match="already holds a finished run"):
        evaluator(NeverEncodes(), step=5)
    (tmp_path / "evals").rename(tmp_path / "moved")
    (tmp_path / "evals").write_text("now a file")
    with pytest.raises(OptionError) as e:
        evaluator(NeverEncodes(), step=6)
    assert e.value.option == "out"
