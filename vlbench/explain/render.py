"""The failure browser's page: one self-contained HTML file (no script, no external URL, opens offline).

Thumbnails are small JPEGs embedded once each as a CSS class (``.t<n>{background-image:url(data:...)}``) and
shown by every element that names the class, so an image retrieved by many queries costs its bytes once.
A Content-Security-Policy in the page forbids every request but ``data:`` images.
"""

from __future__ import annotations

import base64
import difflib
import html
import io

from .flips import HIT_TO_MISS, Section

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:16px;color:#222;max-width:1200px}
h2{margin-top:28px;border-bottom:1px solid #ccc}
.q{border:1px solid #ddd;border-radius:4px;padding:8px;margin:10px 0}
.q h3{margin:0 0 4px;font-size:14px}
.hm h3::before{content:"hit \\2192  miss  ";color:#b00}.mh h3::before{content:"miss \\2192  hit  ";color:#070}
del{background:#fdd;text-decoration:line-through}ins{background:#dfd;text-decoration:none}
.th{display:inline-block;background:#eee center/contain no-repeat;vertical-align:top;border:3px solid #fff}
.pos{border-color:#1a1}.row{margin:4px 0}.row b{display:inline-block;width:150px;vertical-align:top}
.cell{display:inline-block;text-align:center;font-size:11px;margin-right:4px}
ol.caps{margin:2px 0 2px 150px;padding-left:18px}ol.caps li.pos{background:#dfd}
.ranks{font-weight:bold}.note{color:#666}
nav.toc{position:sticky;top:0;background:#fff;border-bottom:1px solid #ccc;padding:4px 0;z-index:1}
nav.toc ul{margin:4px 0;padding-left:18px;columns:2}
section.cond{display:none}
section.cond:target,#all:target~section.cond{display:block}
body:not(:has(:target)) section.cond:first-of-type{display:block}
"""


def esc(x) -> str:
    return html.escape(str(x), quote=True)


def word_diff(original: str, perturbed: str) -> tuple[str, str]:
    """(original, perturbed) as HTML: words the perturbation removed or changed in <del>, the new ones in <ins>."""
    a, b = original.split(), perturbed.split()
    left, right = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        old, new = esc(" ".join(a[i1:i2])), esc(" ".join(b[j1:j2]))
        if op == "equal":
            left.append(old)
            right.append(new)
            continue
        if old:
            left.append(f"<del>{old}</del>")
        if new:
            right.append(f"<ins>{new}</ins>")
    return " ".join(left), " ".join(right)


def jpeg_bytes(image, size: int, quality: int = 70) -> bytes:
    """A JPEG thumbnail whose longer side is ``size`` pixels (deterministic for the same pixels)."""
    im = image.convert("RGB")
    im.thumbnail((size, size))
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=quality, optimize=True)
    return buf.getvalue()


class Thumbs:
    """Each thumbnail once: key -> CSS class; ``css()`` the style rules that embed them."""

    def __init__(self, size: int):
        self.size = size
        self.classes: dict = {}
        self.rules: list[str] = []
        self.bytes = 0

    def add(self, key, make, size: int | None = None) -> str:
        """The class of thumbnail ``key``; ``make()`` returns its PIL image the first time."""
        if key not in self.classes:
            data = jpeg_bytes(make(), size or self.size)
            self.bytes += len(data)
            cls = f"t{len(self.classes)}"
            self.classes[key] = cls
            self.rules.append(f".{cls}{{background-image:url(data:image/jpeg;base64,"
                              f"{base64.b64encode(data).decode('ascii')})}}")
        return self.classes[key]

    def css(self) -> str:
        return "\n".join(self.rules)


def thumb(cls: str, label: str, size: int, *, positive: bool = False, image: int | None = None) -> str:
    extra = " pos" if positive else ""
    data = "" if image is None else f' data-image="{image}"'
    return (f'<span class="th {cls}{extra}" role="img" aria-label="{esc(label)}" title="{esc(label)}"{data} '
            f'style="width:{size}px;height:{size}px"></span>')


def _ranked_images(view, tops, positives, label: str) -> str:
    cells = "".join(f'<span class="cell">'
                    f'{thumb(view.image_class(i), view.image_name(i), view.size, image=i, positive=i in positives)}'
                    f"<br>{r}</span>" for r, i in enumerate(tops, 1))
    return f'<div class="row" data-list="{esc(label)}"><b>{esc(label)} top-{len(tops)}</b>{cells}</div>'


def caption_flip(view, sec: Section, f) -> str:
    """One t2i query under a caption perturbation: the captions with the edit marked, the ground truth, both
    top-5 image lists (positives outlined) and the ground truth's ranks."""
    ds = view.ds
    original, perturbed = ds.captions[f.query], view.perturbed[sec.condition][f.query]
    left, right = word_diff(original, perturbed)
    gt = int(ds.caption_to_image[f.query])
    pos = view.positives("t2i", f.query)
    return (f'<div class="q {"hm" if f.kind == HIT_TO_MISS else "mh"}" data-query="{f.query}" '
            f'data-flip="{esc(f.kind)}" '
            f'data-rank-clean="{f.rank_clean}" data-rank-condition="{f.rank_condition}">'
            f"<h3>caption {esc(ds.caption_ids[f.query])}</h3>"
            f'<div class="row"><b>original</b><span class="orig">{left}</span></div>'
            f'<div class="row"><b>{esc(sec.condition)}</b><span class="pert">{right}</span></div>'
            + pair_scores(view, sec.condition, f.query) +
            f'<div class="row"><b>ground truth</b>'
            f'{thumb(view.image_class(gt), view.image_name(gt), view.size, image=gt, positive=True)}'
            f' <span class="ranks">rank {f.rank_clean} \u2192 {f.rank_condition}</span></div>'
            + _ranked_images(view, f.top_clean, pos, "clean") + _ranked_images(view, f.top_condition, pos,
                                                                               sec.condition)
            + "".join(_ranked_images(view, top, pos, label) for label, top in f.reranked) + "</div>")


def pair_scores(view, condition: str, query: int) -> str:
    """A pairwise probe's two scores for one caption (its image against the original and against the probe), and
    which won (a tie is a miss); empty for a caption the probe did not apply to, or another kind of condition."""
    got = getattr(view.src, "probe_scores", {}).get(condition, {}).get(query)
    if got is None:
        return ""
    a, b = got
    verdict = "the original wins" if a > b else "a tie: a miss" if a == b else "the probe wins: a miss"
    return (f'<div class="row" data-scores="{a:.6g},{b:.6g}"><b>pairwise</b> s(image, original) = {a:.4f}, '
            f"s(image, probe) = {b:.4f}: {esc(verdict)}</div>")


def probe_misses(view, sec: Section, n: int) -> str:
    """The ``n`` captions whose probe beat the original by the most (ties after), each with its probe and both
    scores: what the model did not notice."""
    scores = getattr(view.src, "probe_scores", {}).get(sec.condition) or {}
    misses = sorted(((b - a, q) for q, (a, b) in scores.items() if b >= a), reverse=True)
    if not misses:
        return ""
    items = "".join(f'<li data-query="{q}">{esc(view.ds.captions[q])} \u2192 '
                    f'<span class="pert">{esc(view.perturbed[sec.condition][q])}</span> '
                    f"({scores[q][0]:.4f} vs {scores[q][1]:.4f})</li>" for _, q in misses[:n])
    return (f'<p class="note" data-probe-misses="{len(misses)}">pairwise: {len(misses)} of {len(scores)} probes '
            "score at or above their original caption (a tie is a miss); the largest misses (original \u2192 "
            'probe, s(image, original) vs s(image, probe)):</p><ol class="caps">' + items + "</ol>")


def _ranked_captions(view, tops, positives, label: str) -> str:
    mark = ' class="pos"'
    items = "".join(f'<li{mark if j in positives else ""} data-caption="{j}">{esc(view.ds.captions[j])}</li>'
                    for j in tops)
    return (f'<div class="row" data-list="{esc(label)}"><b>{esc(label)} top-{len(tops)}</b></div>'
            f'<ol class="caps">{items}</ol>')


def image_flip(view, sec: Section, f) -> str:
    """One i2t query under an image corruption: the clean and corrupted query image (both at the corruption's
    geometry), both top-5 caption lists (the image's own captions marked) and the ranks of its first caption."""
    i, big = f.query, view.query_size
    clean = thumb(view.clean_query_class(sec.condition, i), view.image_name(i), big, image=i)
    bad = thumb(view.corrupted_class(sec.condition, i), f"{view.image_name(i)} ({sec.condition})", big, image=i)
    pos = view.positives("i2t", i)
    return (f'<div class="q {"hm" if f.kind == HIT_TO_MISS else "mh"}" data-query="{i}" data-flip="{esc(f.kind)}" '
            f'data-rank-clean="{f.rank_clean}" data-rank-condition="{f.rank_condition}">'
            f"<h3>image {esc(view.image_name(i))}</h3>"
            f'<div class="row"><b>clean / corrupted</b>{clean} {bad} '
            f'<span class="ranks">rank {f.rank_clean} \u2192 {f.rank_condition}</span></div>'
            + _ranked_captions(view, f.top_clean, pos, "clean") + _ranked_captions(view, f.top_condition, pos,
                                                                                   sec.condition)
            + "".join(_ranked_captions(view, top, pos, label) for label, top in f.reranked) + "</div>")


def flips_line(rows: list) -> str:
    """The run's flips.csv for the section's condition and direction, in one line (empty without it)."""
    if not rows:
        return ""
    ks = "/".join(r["k"] for r in rows)
    hm, mh = "/".join(r["hit_to_miss"] for r in rows), "/".join(r["miss_to_hit"] for r in rows)
    first = rows[0]
    line = (f"flips.csv at k={ks}: hit \u2192 miss {hm}, miss \u2192 hit {mh}; rank change median "
            f"{first['rank_change_median']}, 90th percentile {first['rank_change_p90']}")
    if first.get("top10_overlap"):
        line += f"; top-10 overlap {first['top10_overlap']}"
    return f'<p class="note" data-flips="1">{esc(line)}.</p>'


def section_html(view, sec: Section) -> str:
    """One condition's section. Sections are shown one at a time (the one the address names, ``#c-<condition>``;
    the first by default; every one under ``#all``), by CSS alone: the page has no script."""
    head = f'<h2>{esc(sec.condition)} <span class="note">({esc(sec.kind)}'
    head += f", {sec.direction})</span></h2>" if sec.direction else ")</span></h2>"
    attrs = f'id="c-{esc(sec.condition)}" class="cond" data-condition="{esc(sec.condition)}"'
    if sec.skipped:
        return (f'<section {attrs} data-skipped="1">{head}'
                f'<p class="note">not shown: {esc(sec.skipped)}</p></section>')
    counts = (f'<p>{sec.n_queries} {sec.direction} queries; at k=1 {sec.n_hit_to_miss} go hit \u2192 miss, '
              f'{sec.n_miss_to_hit} miss \u2192 hit; {len(sec.flips)} shown.</p>')
    counts += flips_line(view.src.flip_rows.get((sec.condition, sec.direction), []))
    if sec.kind == "sensitivity":  # a meaning-changing probe: the captions whose probe the model did not notice
        counts += probe_misses(view, sec, max(5, len(sec.flips)))
    body = "".join((caption_flip if sec.kind in ("caption", "sensitivity") else image_flip)(view, sec, f)
                   for f in sec.flips)
    return (f'<section {attrs} data-direction="{sec.direction}">{head}{counts}'
            f'{body or "<p class=note>no query flips at k=1.</p>"}</section>')


def page(view, sections: list[Section], title: str, intro: str) -> str:
    """The whole page (thumbnails are made while the sections render, so the style comes last to assemble): the
    title, the intro, a sticky list of the conditions (each link shows that condition's section alone, so the
    page stays one condition long; "all conditions" shows every one), then the sections."""
    toc = "".join(f'<li><a href="#c-{esc(s.condition)}">{esc(s.condition)}</a> '
                  + ("<span class=note>not shown</span>" if s.skipped else
                     f"{s.n_hit_to_miss} hit\u2192miss, {s.n_miss_to_hit} miss\u2192hit") + "</li>" for s in sections)
    nav = (f'<nav class="toc"><b>{len(sections)} conditions</b> <span class="note">(one at a time; the first is '
           f'shown until you pick one)</span> <a href="#all">all conditions</a><ul>{toc}</ul></nav>'
           '<span id="all"></span>')
    body = "".join(section_html(view, s) for s in sections)
    return ("<!DOCTYPE html>\n<html lang=\"en\" data-page=\"vlbench-explain\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f'<meta name="vlbench-run" content="{esc(str(view.src.results.get("run_id", "")))}">'  # for --overwrite
            f'<title>{esc(title)}</title>'
            f"<style>{STYLE}\n{view.thumbs.css()}</style></head><body><h1>{esc(title)}</h1>{intro}"
            f"{nav}{body}</body></html>\n")
