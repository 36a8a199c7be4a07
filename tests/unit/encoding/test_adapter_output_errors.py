"""An adapter (a model plug-in) that returns something other than an array of embeddings gets an error naming
the adapter and its method, not NumPy's "could not convert string to float" from deep inside a run (issue 44)."""

from __future__ import annotations

import numpy as np
import pytest

from vlbench import ModelAdapter
from vlbench.encoding.encode import encode_images, encode_texts
from vlbench.errors import ModelError


class _Returns(ModelAdapter):
    name = "wordy"

    def __init__(self, value):
        self.value = value

    def encode_texts(self, texts):
        return self.value(texts)

    def encode_images(self, batch):
        return self.value(batch)


@pytest.mark.parametrize("value, what", [
    (lambda xs: [f"vector of {x}" for x in xs], "str values"),
    (lambda xs: "a caption's vector", "returned str"),
    (lambda xs: None, "returned NoneType"),
    (lambda xs: [[1.0, 2.0]] + [[1.0]] * (len(xs) - 1), "not a rectangular array"),
    (lambda xs: [{"v": 1.0} for _ in xs], "object values"),
])
def test_adapter_returning_strings_or_objects_is_an_error_naming_the_adapter_and_method(value, what):
    with pytest.raises(ModelError, match=r"model adapter 'wordy' \(_Returns\.encode_texts\) ") as err:
        encode_texts(_Returns(value), ["a dog", "two cats"], progress=False)
    assert what in err.value.message
    assert "(batch, dim)" in err.value.hint


def test_adapter_returning_strings_for_images_names_encode_images():
    from vlbench.encoding.encode import EncodeStats, _Encoder

    enc = _Encoder(_Returns(lambda xs: ["x"] * len(xs)).encode_images, lambda b, i, j: b[i:j], "images",
                   EncodeStats(), "image_forward_seconds", _Returns(None))
    with pytest.raises(ModelError, match=r"\(_Returns\.encode_images\) returned a list of str values"):
        enc(np.zeros((2, 3), np.float32), 2)
    assert callable(encode_images)


def test_adapter_returning_lists_of_numbers_is_still_accepted():
    out = encode_texts(_Returns(lambda xs: [[1.0, float(i + 1)] for i in range(len(xs))]), ["a", "b"],
                       progress=False)
    assert np.allclose(np.linalg.norm(np.stack([out[0], out[1]]), axis=1), 1.0)
