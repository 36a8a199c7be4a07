"""Shortcut probes: rendering read back by template matching, plans, and a digit-reading test model."""

import re

import numpy as np
import pytest
from PIL import Image

from vlbench.metrics.compute import score
from vlbench.errors import VlbenchError
from vlbench import shortcuts as sc


def _exemplars():
    """All scikit-learn 8x8 digits, loaded here independently of the renderer (0..1 floats)."""
    from sklearn.datasets import load_digits

    d = load_digits()
    return d.images.reshape(len(d.images), -1) / 16.0, d.target


EX, LABELS = _exemplars()


def read_digits(img: Image.Image) -> str:
    """Read the 6 digits back: per the spec, 6 square cells evenly spaced across the top
    (side min(W/6, H/3)); each crop is shrunk to 8x8 and matched to its nearest exemplar."""
    w, h = img.size
    cell = w / 6
    side = int(min(cell, h / 3))
    gray = img.convert("L")
    out = ""
    for p in range(6):
        left = int(round(p * cell + (cell - side) / 2))
        crop = gray.crop((left, 0, left + side, side)).resize((8, 8), Image.BOX)
        v = np.asarray(crop, dtype=float).ravel() / 255.0
        out += str(LABELS[np.argmin(((EX - v) ** 2).sum(1))])
    return out


@pytest.fixture(scope="module")
def bank():
    return sc.load_digit_bank("sklearn-digits")


@pytest.mark.parametrize("size", [(240, 160), (224, 224), (500, 333), (97, 300)])
def test_rendered_digits_read_back(bank, size):
    rng = np.random.default_rng(1)
    base = Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))
    for number in (0, 7, 42, 123456, 999999, 305170):
        img = sc.render(base, number, bank=bank, seed=3, image_id=f"im{number}")
        assert img.size == base.size
        assert read_digits(img) == f"{number:06d}"
        # the part below the digits is untouched
        side = int(min(size[0] / 6, size[1] / 3))
        assert np.array_equal(np.asarray(img)[side:], np.asarray(base)[side:])


def test_exemplar_choice_is_deterministic_per_seed_image_position(bank):
    base = Image.new("RGB", (240, 160), (10, 200, 30))
    a = np.asarray(sc.render(base, 111111, bank=bank, seed=0, image_id="a"))
    assert np.array_equal(a, np.asarray(sc.render(base, 111111, bank=bank, seed=0, image_id="a")))
    b = np.asarray(sc.render(base, 111111, bank=bank, seed=1, image_id="a"))
    c = np.asarray(sc.render(base, 111111, bank=bank, seed=0, image_id="b"))
    assert not np.array_equal(a, b) and not np.array_equal(a, c)
    # six 1s drawn at one image: positions draw different exemplars (not all tiles identical)
    side = 40
    tiles = [a[:side, p * 40:(p + 1) * 40] for p in range(6)]
    assert len({t.tobytes() for t in tiles}) > 1
    assert bank.source == "sklearn-digits"


def test_offline_digit_source_falls_back_and_is_recorded(monkeypatch, tmp_path):
    def offline(root, download):
        raise OSError("no network")

    monkeypatch.setattr("vlbench.shortcuts.digits._mnist_bank", offline)  # where the bank is loaded
    bank = sc.load_digit_bank("auto", cache_dir=tmp_path)
    assert bank.source == "sklearn-digits"
    assert sorted(bank.images) == list(range(10)) and sum(len(v) for v in bank.images.values()) == 1797
    with pytest.raises(VlbenchError, match="MNIST could not be loaded"):
        sc.load_digit_bank("mnist", cache_dir=tmp_path)
    with pytest.raises(VlbenchError, match="unknown digit source"):
        sc.load_digit_bank("emnist")


def test_caption_appends_space_separated_digits():
    assert sc.caption("A dog runs.", 42) == "A dog runs. 0 0 0 0 4 2"
    assert sc.caption("x ", 999999) == "x 9 9 9 9 9 9"
    for bad in (-1, 10 ** 6, 1.5, "12"):
        with pytest.raises(VlbenchError, match="shortcut number"):
            sc.caption("x", bad)


def test_probe_plans():
    c2i = [0, 0, 1, 1, 2, 3, 4, 4]
    m = sc.probe_plan(5, c2i, "matched")
    assert m.image_numbers == [0, 1, 2, 3, 4] and m.caption_numbers == [0, 0, 1, 1, 2, 3, 4, 4]
    assert sc.probe_plan(5, c2i, "caption-only").image_numbers == [None] * 5
    assert sc.probe_plan(5, c2i, "image-only").caption_numbers == [None] * 8
    b = sc.probe_plan(5, c2i, "bits=1")
    assert b.image_numbers == [0, 1, 0, 1, 0] and b.caption_numbers == [0, 0, 1, 1, 0, 1, 0, 0]
    for seed in range(20):
        mm = sc.probe_plan(5, c2i, "mismatched", seed=seed)
        # captions of one image share a number, and it is never their own image's number
        per_image = {i: {mm.caption_numbers[j] for j, ii in enumerate(c2i) if ii == i} for i in range(5)}
        assert all(len(v) == 1 and i not in v for i, v in per_image.items())
        assert sorted(next(iter(v)) for v in per_image.values()) == [0, 1, 2, 3, 4]  # a permutation
    assert sc.probe_plan(5, c2i, "mismatched", seed=4) == sc.probe_plan(5, c2i, "mismatched", seed=4)
    for bad in ("bits=0", "bits=20", "bits=x", "shuffled"):
        with pytest.raises(VlbenchError, match="probe"):
            sc.probe_plan(5, c2i, bad)


class DigitReader:
    """A plug-in-style test adapter that reads shortcuts: its embedding is a noisy content vector (looked
    up by the image's background colour / the caption without digits) plus a one-hot code of the digits it
    reads (template matching on images, the appended digits on captions); no digits, zero code."""

    def __init__(self, content_img: dict, content_txt: dict, weight: float = 10.0):
        self.ci, self.ct, self.w = content_img, content_txt, weight

    def _code(self, digits):
        v = np.zeros(60)
        if digits:
            v[[10 * p + int(d) for p, d in enumerate(digits)]] = self.w
        return v

    def encode_images(self, batch):
        rows = []
        for img in batch:
            w, h = img.size
            key = img.getpixel((0, h - 1))
            has = bool((np.asarray(img)[:5] != np.array(key)).any())  # anything drawn at the top
            rows.append(np.concatenate([self.ci[key], self._code(read_digits(img) if has else None)]))
        return np.stack(rows)

    def encode_texts(self, texts):
        rows = []
        for t in texts:
            m = re.search(r"((?: \d){6})$", t)
            base = t[: m.start()] if m else t
            rows.append(np.concatenate([self.ct[base], self._code(m.group(1).replace(" ", "") if m else None)]))
        return np.stack(rows)


def test_digit_reading_model_rises_when_matched_and_falls_when_mismatched(bank):
    n, per = 12, 3
    rng = np.random.default_rng(0)
    colours = [(int(20 * i + 5), 100, 200) for i in range(n)]
    images = [Image.new("RGB", (120, 90), c) for c in colours]
    c2i = np.repeat(np.arange(n), per)
    captions = [f"caption {j} of image {i}" for j, i in enumerate(c2i)]
    u = rng.normal(size=(n, 16))
    model = DigitReader({c: u[i] for i, c in enumerate(colours)},
                        {t: u[i] + 1.3 * rng.normal(size=16) for t, i in zip(captions, c2i)})

    def r1(probe):
        if probe is None:
            imgs, caps = images, captions
        else:
            plan = sc.probe_plan(n, c2i, probe, seed=5)
            imgs = [im if k is None else sc.render(im, k, bank=bank, seed=5, image_id=str(i))
                    for i, (im, k) in enumerate(zip(images, plan.image_numbers))]
            caps = sc.apply_plan_to_captions(captions, plan)
        s = score(model.encode_images(imgs) @ model.encode_texts(caps).T, c2i)
        return s["i2t_recall@1"], s["t2i_recall@1"]

    clean = r1(None)
    assert 0 < clean[0] < 100 and 0 < clean[1] < 100  # the content alone is imperfect
    # one modality only: the code meets zeros, the scores are exactly the clean ones
    assert r1("caption-only") == clean and r1("image-only") == clean
    assert r1("matched") == (100.0, 100.0)  # the expected rise
    assert r1("mismatched") == (0.0, 0.0)  # the expected fall: the shared code points elsewhere
    # bits=1: two tags; the code dominates, so each query ranks only the candidates of its own parity by
    # content: worked out from the content vectors and the parities alone, without rendering
    content = u @ np.stack([model.ct[t] for t in captions]).T
    parity = np.arange(n)[:, None] % 2 == c2i[None, :] % 2
    expected = score(content + 1e4 * parity, c2i)
    assert r1("bits=1") == (expected["i2t_recall@1"], expected["t2i_recall@1"])
    assert r1("bits=1") != clean


def test_run_probe_with_an_adapter_matches_the_hand_computation(bank):
    from vlbench.shortcuts.probe import run_probe

    n, per = 10, 2
    rng = np.random.default_rng(3)
    colours = [(int(20 * i + 5), 60, 90) for i in range(n)]
    c2i = np.repeat(np.arange(n), per)
    captions = [f"text {j} of {i}" for j, i in enumerate(c2i)]
    u = rng.normal(size=(n, 16))
    model = DigitReader({c: u[i] for i, c in enumerate(colours)},
                        {t: u[i] + 1.5 * rng.normal(size=16) for t, i in zip(captions, c2i)})
    model.preprocess = lambda im: im
    loaders = [lambda c=c: Image.new("RGB", (120, 90), c) for c in colours]
    for probe in (None, "matched", "mismatched", "image-only"):
        res = run_probe(model, loaders, captions, c2i, probe, bank=bank, seed=2, batch_size=3)
        # by hand: build the inputs, embed all at once, cosine, score
        plan = None if probe is None else sc.probe_plan(n, c2i, probe, seed=2)
        imgs = [Image.new("RGB", (120, 90), c) for c in colours]
        if plan is not None:
            imgs = [im if k is None else sc.render(im, k, bank=bank, seed=2, image_id=str(i))
                    for i, (im, k) in enumerate(zip(imgs, plan.image_numbers))]
        caps = captions if plan is None else sc.apply_plan_to_captions(captions, plan)
        a, b = model.encode_images(imgs), model.encode_texts(caps)
        a, b = a / np.linalg.norm(a, axis=1, keepdims=True), b / np.linalg.norm(b, axis=1, keepdims=True)
        want = score(a @ b.T, c2i)
        assert res.metrics["i2t_recall@1"] == pytest.approx(want["i2t_recall@1"])
        assert res.metrics["t2i_recall@1"] == pytest.approx(want["t2i_recall@1"])
        assert res.probe == (probe or "clean") and res.digit_source == "sklearn-digits"
        assert len(res.evaluation.per_query("t2i")["best_rank"]) == len(captions)
    assert run_probe(model, loaders, captions, c2i, "matched", bank=bank).metrics["t2i_recall@1"] == 100.0
