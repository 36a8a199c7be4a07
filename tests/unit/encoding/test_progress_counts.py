"""Progress bars count what the lines before them announce: the perturbation bar counts every
(perturbation, caption) output; the text bar counts the distinct texts, the cached ones counted as done."""

from __future__ import annotations

import numpy as np
import tqdm.auto

from vlbench.encoding.cache import EmbeddingCache
from vlbench.encoding.encode import encode_texts
from vlbench.perturbations import engine


class _Recorder:
    """Stands in for tqdm: remembers the total, the start and every update."""

    made: list = []

    def __init__(self, it=None, total=None, initial=0, **kw):
        self.total, self.n, self.it = total, initial, it
        _Recorder.made.append(self)

    def update(self, n=1):
        self.n += n

    def set_postfix_str(self, text):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __iter__(self):
        for x in self.it:
            self.n += 1
            yield x


class _Texts:
    """The narrowest text encoder: a text's key is the text, its vector its length."""

    def text_keys(self, texts):
        return list(texts)

    def text_lengths(self, texts):
        return [len(t) for t in texts]

    def encode_texts(self, texts):
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)


def test_perturbation_bar_counts_every_output(monkeypatch):
    _Recorder.made = []
    monkeypatch.setattr(engine, "_progress", lambda it, total, desc: _Recorder(it, total=total))
    captions = ["a dog runs on the grass", "two cats sleep", "", "a red car parked outside"]
    out = engine.perturb_captions(captions, ["c0", "c1", "c2", "c3"], ["char-swap", "nearby-char"], progress=True)
    (bar,) = _Recorder.made
    assert bar.total == len(captions) * 2 == bar.n  # announced 4 captions x 2 perturbations, counted 8
    assert set(out) == {"char-swap", "nearby-char"}


def test_text_bar_counts_the_distinct_texts_cached_ones_as_done(monkeypatch, tmp_path):
    _Recorder.made = []
    monkeypatch.setattr(tqdm.auto, "tqdm", _Recorder)
    cache = EmbeddingCache(tmp_path, "b" * 64)
    texts = ["a dog", "a cat", "a dog", "a bird", "a cat"]
    encode_texts(_Texts(), texts, cache=cache, progress=True)
    bar = _Recorder.made[-1]
    assert bar.total == bar.n == len(set(texts)) == 3
    encode_texts(_Texts(), texts + ["a fish"], cache=cache, progress=True)  # three cached, one new
    bar = _Recorder.made[-1]
    assert bar.total == bar.n == 4
