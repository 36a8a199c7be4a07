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
