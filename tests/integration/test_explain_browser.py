"""`vlbench explain RUN`: the failure browser of a real small run, checked against a recomputation.

Data: 8 colour images (red, green, blue, yellow, each in two shades) with two captions each that name the colour.
Model: colour-vec (tests/support/colour_model.py: an image is its mean colour, a caption its first colour word, "true"
reads as blue). Conditions: distraction-true (every caption reads as blue: the red, green and yellow captions that
hit go hit -> miss in t2i), char-swap, and fog at severity 5 (colours fade to grey: the red and green images
that hit read as yellow and go hit -> miss in i2t). Of two shades the one nearer the pure colour wins in
t2i; in i2t captions tie and the lower index wins. Everything shown is recomputed here from the colours, independently of vlbench's scorer.
"""

from __future__ import annotations

import base64
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from support.browser import BROWSER, NEEDS_BROWSER

from vlbench.cli import main

COLOURS = [("red", (220, 30, 30)), ("green", (30, 200, 40)), ("blue", (30, 40, 220)), ("yellow", (230, 220, 30)),
           ("red", (160, 20, 25)), ("green", (20, 140, 30)), ("blue", (25, 30, 150)), ("yellow", (170, 160, 20))]
WORD = {"red": (1, 0, 0), "green": (0, 1, 0), "blue": (0, 0, 1), "yellow": (1, 1, 0)}
N = 2  # --per-perturbation


def top_and_rank(sim: np.ndarray, positives: list) -> tuple[np.ndarray, np.ndarray]:
    """(top-10 per row by score desc then index asc, -1 padding a gallery under 10; the first positive's rank)."""
    order = np.argsort(-sim, axis=1, kind="stable")
    ranks = [int(np.flatnonzero(np.isin(order[q], list(positives[q])))[0]) + 1 for q in range(len(sim))]
    top = np.full((len(sim), 10), -1, dtype=np.int32)
    top[:, :min(10, order.shape[1])] = order[:, :10]
    return top, np.asarray(ranks, dtype=np.int32)


def normed(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _caption_vec(text: str) -> np.ndarray:
    if "true" in text.split():
        return np.array(WORD["blue"], float)
    for w in text.lower().replace(".", " ").split():
        if w in WORD:
            return np.array(WORD[w], float)
    return np.ones(3)


@pytest.fixture(scope="module")
def colour_run(tmp_path_factory):
    from PIL import Image

    from vlbench import registry

    if "colour-vec" not in registry.models:
        registry.models.register("colour-vec", "support.colour_model:load_vec", source="plugin:test")
    root = tmp_path_factory.mktemp("explain")
    rng = np.random.default_rng(0)
    (root / "data" / "images").mkdir(parents=True)
    rows = []
    for i, (word, rgb) in enumerate(COLOURS):
        arr = np.clip(np.array(rgb) + rng.normal(0, 6, size=(120, 160, 3)), 0, 255).astype(np.uint8)
        Image.fromarray(arr).save(root / "data" / "images" / f"{word}{i}.png")
        rows.append({"image": f"images/{word}{i}.png", "captions": [f"a {word} square on a plain wall",
                                                                    f"the colour {word} fills the frame"]})
    manifest = root / "data" / "m.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = root / "run"
    assert main(["run", "--model", "colour-vec", "--dataset", f"custom:{manifest}", "--perturb",
                 "distraction-true,char-swap", "--perturb-images", "fog:5", "--out", str(out), "--quiet",
                 "--num-workers", "0", "--bootstrap", "10", "--validity", "off",
                 "--cache-dir", str(root / "cache")]) == 0
    assert (out / "retrieved.npz").is_file()  # every run writes it (formats.md 2)
    return out, manifest, root


def _expected(out: Path, manifest: Path):
    """(retrieved arrays, perturbed captions, corrupted images) recomputed from the colours."""
    from vlbench.datasets.core import load_dataset
    from vlbench.encoding.images import file_key, load_image
    from vlbench.imageperturb import corrupt
    from vlbench.perturbations import perturb_captions

    ds = load_dataset(f"custom:{manifest}")
    sets = perturb_captions(ds.captions, ds.caption_ids, ["distraction-true", "char-swap"], seed=0)
    perturbed = {n: list(s.texts) for n, s in sets.items()}
    raw = [load_image(ds.image_path(i)) for i in range(ds.n_images)]
    corrupted = [corrupt(im, "fog", 5, 0, file_key(ds.image_path(i))) for i, im in enumerate(raw)]

    def img_vecs(ims):
        return normed([np.asarray(im, np.float64).reshape(-1, 3).mean(0) / 255 for im in ims])

    def txt_vecs(caps):
        return normed([_caption_vec(c) for c in caps])

    c2i = np.asarray(ds.caption_to_image)
    pos = {"t2i": [{int(c2i[j])} for j in range(len(c2i))],
           "i2t": [set(np.flatnonzero(c2i == i).tolist()) for i in range(ds.n_images)]}
    arrays = {}
    for cond, im, tx in (("clean", img_vecs(raw), txt_vecs(ds.captions)),
                         ("distraction-true", img_vecs(raw), txt_vecs(perturbed["distraction-true"])),
                         ("char-swap", img_vecs(raw), txt_vecs(perturbed["char-swap"])),
                         ("img:fog:5", img_vecs(corrupted), txt_vecs(ds.captions))):
        for d, sim in (("t2i", tx @ im.T), ("i2t", im @ tx.T)):
            arrays[f"{cond}|{d}"], arrays[f"{cond}|{d}|rank"] = top_and_rank(sim, pos[d])
    return arrays, perturbed, corrupted, ds


class _Page(HTMLParser):
    """The page's query blocks: attributes, the text of their captions and lists, their thumbnails."""

    def __init__(self):
        super().__init__()
        self.sections, self.blocks, self.style = {}, [], ""
        self._sec = self._span = None
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "style":
            self._in_style = True
        if tag == "section":
            self._sec = a["data-condition"]
            self.sections[self._sec] = a
        if tag == "div" and "data-query" in a:
            self.blocks.append({"condition": self._sec, **a, "orig": "", "pert": "", "thumbs": [], "lists": {},
                                "captions": {}})
        if not self.blocks or tag in ("style", "section"):
            return
        b = self.blocks[-1]
        if tag == "span" and a.get("class") in ("orig", "pert"):
            self._span = a["class"]
        if tag == "div" and "data-list" in a:
            b["_list"] = a["data-list"]
            b["lists"][a["data-list"]] = []
        if tag == "span" and "data-image" in a:
            b["thumbs"].append(a)
            if "_list" in b:
                b["lists"][b["_list"]].append(int(a["data-image"]))
        if tag == "li" and "data-caption" in a:
            b["lists"][b["_list"]].append(int(a["data-caption"]))

    def handle_endtag(self, tag):
        if tag == "style":
            self._in_style = False
        if tag == "span" and self._span:
            self._span = None

    def handle_data(self, data):
        if self._in_style:
            self.style += data
        elif self._span and self.blocks:
            self.blocks[-1][self._span] += data


def _parse(path: Path) -> _Page:
    p = _Page()
    p.feed(path.read_text())
    return p


def _thumb(page: _Page, cls: str):
    from PIL import Image

    m = re.search(r"\." + re.escape(cls) + r"\{background-image:url\(data:image/jpeg;base64,([A-Za-z0-9+/=]+)\)\}",
                  page.style)
    assert m, f"no thumbnail rule for {cls}"
    return Image.open(io.BytesIO(base64.b64decode(m.group(1))))


def _mean(im) -> np.ndarray:
    return np.asarray(im.convert("RGB"), np.float64).reshape(-1, 3).mean(0)


@pytest.fixture(scope="module")
def explained(colour_run):
    out, manifest, root = colour_run
    page = root / "page.html"
    assert main(["explain", str(out), "--out", str(page), "--per-perturbation", str(N), "--seed", "3"]) == 0
    return page, _expected(out, manifest)


def test_retrieved_lists_equal_the_recomputation(colour_run, explained):
    got = np.load(colour_run[0] / "retrieved.npz")
    want = explained[1][0]
    assert sorted(got.files) == sorted(want)
    for name in want:
        assert np.array_equal(got[name], want[name]), name


def test_page_shows_the_sampled_flips_as_recomputed(explained):
    page_path, (arrays, perturbed, corrupted, ds) = explained
    page = _parse(page_path)
    assert set(page.sections) == {"distraction-true", "char-swap", "img:fog:5"}
    by_cond = {}
    for b in page.blocks:
        by_cond.setdefault(b["condition"], []).append(b)
    # distraction-true: every caption reads as blue; the red, green and yellow captions that hit on clean data
    # (of the shade nearer the pure colour: red0, green1, yellow7) go hit -> miss (t2i)
    r0, r1 = arrays["clean|t2i|rank"], arrays["distraction-true|t2i|rank"]
    hm = set(np.flatnonzero((r0 == 1) & (r1 > 1)).tolist())
    assert hm == {0, 1, 2, 3, 14, 15}
    shown = by_cond["distraction-true"]
    assert len(shown) == N and {int(b["data-query"]) for b in shown} <= hm
    assert all(b["data-flip"] == "hit->miss" for b in shown)
    for cond in ("distraction-true", "char-swap"):
        for b in by_cond.get(cond, []):
            j = int(b["data-query"])
            assert b["orig"].split() == ds.captions[j].split()
            assert b["pert"].split() == perturbed[cond][j].split()
            assert (int(b["data-rank-clean"]), int(b["data-rank-condition"])) == (r0[j], arrays[f"{cond}|t2i|rank"][j])
            assert b["lists"]["clean"] == arrays["clean|t2i"][j, :5].tolist()
            assert b["lists"][cond] == arrays[f"{cond}|t2i"][j, :5].tolist()
            gt = int(ds.caption_to_image[j])
            assert int(b["thumbs"][0]["data-image"]) == gt and "pos" in b["thumbs"][0]["class"]
    assert "true" in by_cond["distraction-true"][0]["pert"] and "<ins>" in page_path.read_text()
    # fog:5: the red and green images that hit (red0, green1) read as yellow: hit -> miss (i2t)
    i0, i1 = arrays["clean|i2t|rank"], arrays["img:fog:5|i2t|rank"]
    assert set(np.flatnonzero((i0 == 1) & (i1 > 1)).tolist()) == {0, 1}
    shown = by_cond["img:fog:5"]
    assert len(shown) == N
    for b in shown:
        i = int(b["data-query"])
        assert i in {0, 1} and (int(b["data-rank-clean"]), int(b["data-rank-condition"])) == (1, i1[i])
        assert b["lists"]["clean"] == arrays["clean|i2t"][i, :5].tolist()
        assert b["lists"]["img:fog:5"] == arrays["img:fog:5|i2t"][i, :5].tolist()
        # the thumbnails: the clean and the corrupted query image, by their mean colour (JPEG: within 4 levels)
        clean_cls, bad_cls = (t["class"].split()[1] for t in b["thumbs"][:2])
        assert np.allclose(_mean(_thumb(page, clean_cls)), COLOURS[i][1], atol=4)
        assert np.allclose(_mean(_thumb(page, bad_cls)), _mean(corrupted[i]), atol=4)
        assert _thumb(page, bad_cls).size == (144, 108)  # query images: 1.5 times --thumb-size


def test_thumbnails_small_embedded_and_page_offline(explained):
    page_path, (arrays, *_r, ds) = explained
    page = _parse(page_path)
    text = page_path.read_text()
    classes = {t["class"].split()[1] for b in page.blocks for t in b["thumbs"]}
    for b in page.blocks:
        for t in b["thumbs"]:
            i = int(t["data-image"])
            im = _thumb(page, t["class"].split()[1])
            # the 160 x 120 originals: 96 x 72 in lists, 144 x 108 as i2t query images (1.5 times --thumb-size)
            assert im.format == "JPEG" and im.size == ((144, 108) if b["condition"] == "img:fog:5" else (96, 72))
            if "fog" not in t["aria-label"]:
                assert np.allclose(_mean(im), COLOURS[i][1], atol=4), (t, i)
    assert len(re.findall(r"\.t\d+\{", page.style)) == len(classes)  # each thumbnail embedded once
    assert "http://" not in text and "https://" not in text and "<script" not in text
    assert "Content-Security-Policy" in text


def test_deterministic_under_the_seed(colour_run, explained, tmp_path):
    out = colour_run[0]
    again = tmp_path / "again.html"
    assert main(["explain", str(out), "--out", str(again), "--per-perturbation", str(N), "--seed", "3"]) == 0
    assert again.read_bytes() == explained[0].read_bytes()
    chosen = set()
    for seed in range(6):  # 6 flips, 2 shown: other seeds show other queries
        p = tmp_path / f"s{seed}.html"
        assert main(["explain", str(out), "--out", str(p), "--per-perturbation", str(N), "--seed", str(seed)]) == 0
        chosen.add(tuple(int(b["data-query"]) for b in _parse(p).blocks if b["condition"] == "distraction-true"))
    assert len(chosen) > 1


@NEEDS_BROWSER
def test_screenshot_in_headless_chromium(explained, tmp_path):
    import subprocess

    browser = BROWSER
    shot = tmp_path / "explain.png"
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
           "--disable-background-networking", f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1100,1600",
           f"--screenshot={shot}", explained[0].resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and shot.is_file(), proc.stderr[-2000:]
    from PIL import Image

    im = np.asarray(Image.open(shot).convert("RGB"), np.float64)
    assert im.shape[:2] == (1600, 1100)
    # the thumbnails were painted: pixels of the red image's colour appear on the page
    red = np.all(np.abs(im - COLOURS[0][1]) < 20, axis=2)
    assert red.sum() > 500


def test_sections_carry_the_runs_flip_counts_as_recomputed(explained):
    """Each section's line from the run's flips.csv (helper K's) equals the counts from the recomputed ranks."""
    page_path, (arrays, *_r) = explained
    text = page_path.read_text()
    for cond, d in (("distraction-true", "t2i"), ("char-swap", "t2i"), ("img:fog:5", "i2t")):
        section = text[text.index(f'data-condition="{cond}"'):]
        line = re.search(r'data-flips="1">([^<]*)<', section).group(1).replace("&amp;", "&")
        r0, r1 = arrays[f"clean|{d}|rank"], arrays[f"{cond}|{d}|rank"]
        hm = "/".join(str(int(((r0 <= k) & (r1 > k)).sum())) for k in (1, 5, 10))
        mh = "/".join(str(int(((r0 > k) & (r1 <= k)).sum())) for k in (1, 5, 10))
        change = r1 - r0
        want = (f"flips.csv at k=1/5/10: hit \u2192 miss {hm}, miss \u2192 hit {mh}; rank change median "
                f"{np.median(change):g}, 90th percentile {np.percentile(change, 90):g}")
        assert line.startswith(want), (line, want)
        if d == "t2i":  # the share of the top lists kept, of the 8 candidates the gallery has
            t0, t1 = arrays[f"clean|{d}"], arrays[f"{cond}|{d}"]
            overlap = np.mean([len(set(a[a >= 0]) & set(b[b >= 0])) / 8 for a, b in zip(t0, t1)])
            assert line.endswith(f"; top-10 overlap {overlap:g}.")
        # the page's own k=1 counts say the same
        assert f"at k=1 {hm.split('/')[0]} go hit \u2192 miss, {mh.split('/')[0]} miss \u2192 hit" in section


def _painted_height(png: Path) -> int:
    """The last row of a full-window screenshot that is not page background (white)."""
    from PIL import Image

    im = np.asarray(Image.open(png).convert("L"), np.float64)
    rows = np.flatnonzero((im < 245).any(axis=1))
    return int(rows[-1]) + 1 if len(rows) else 0


@NEEDS_BROWSER
def test_titled_by_the_run_names_one_condition_at_a_time(colour_run, tmp_path):
    """The page is titled by --model-name and --dataset-name (not the run id), and shows one
    condition at a time (the first, or the one the address names; #all shows every one), by CSS, no script."""
    import subprocess

    _out, manifest, root = colour_run
    named = tmp_path / "named"
    assert main(["run", "--model", "colour-vec", "--model-name", "Colour model v1", "--dataset", f"custom:{manifest}",
                 "--dataset-name", "Eight colours", "--perturb", "distraction-true,char-swap", "--perturb-images",
                 "fog:5", "--out", str(named), "--quiet", "--num-workers", "0", "--bootstrap", "10", "--validity",
                 "off", "--cache-dir", str(root / "cache")]) == 0
    page = tmp_path / "named.html"
    assert main(["explain", str(named), "--out", str(page), "--per-perturbation", str(N)]) == 0
    text = page.read_text()
    title = "Colour model v1 on Eight colours: queries the conditions flip"
    assert f"<title>{title}</title>" in text and f"<h1>{title}</h1>" in text
    assert "<script" not in text and 'href="#all"' in text and 'id="c-img:fog:5" class="cond"' in text
    heights = {}
    for view in ("", "#c-img:fog:5", "#all"):
        shot = tmp_path / f"shot{len(heights)}.png"
        cmd = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
               "--disable-background-networking", f"--user-data-dir={tmp_path / 'profile'}",
               "--window-size=1100,4000", f"--screenshot={shot}", page.resolve().as_uri() + view]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and shot.is_file(), proc.stderr[-2000:]
        heights[view] = _painted_height(shot)
    # one condition (two queries) is far shorter than all three conditions' six queries
    assert 0 < heights[""] < heights["#all"] and 0 < heights["#c-img:fog:5"] < heights["#all"]
    assert heights["#all"] > 2 * heights[""] - 400  # the header is shared, the sections add up
