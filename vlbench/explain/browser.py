"""The failure browser's page: read a run folder and its dataset, pick the flipped queries, write the HTML
(``vlbench explain``; the package text says what the page shows)."""

from __future__ import annotations

from pathlib import Path

from ..errors import OptionError, VlbenchError
from ..runfolder import EXPLAIN_PAGE, read_results
from ..util.io import atomic_write_text

DEFAULT_NAME = EXPLAIN_PAGE  # the name older code imported


class _View:
    """What the renderer asks of the run while it writes the page: names, positives and thumbnails."""

    def __init__(self, src, size: int):  # src: source.RunSource
        from .render import Thumbs  # lazy: vlbench --help imports this module; keep it light

        self.src, self.ds, self.perturbed = src, src.ds, src.perturbed
        self.size, self.query_size = size, size * 3 // 2
        self.thumbs = Thumbs(size)
        self._decoded: dict = {}

    def image_name(self, i: int) -> str:
        return str(self.ds.gallery_images[i])

    def _image(self, i: int):
        from ..encoding.images import load_image  # lazy: vlbench --help imports this module; keep it light

        if i not in self._decoded:
            self._decoded = {i: load_image(self.src.image_path(i))}  # one decoded image kept at a time
        return self._decoded[i]

    def image_class(self, i: int, size: int | None = None) -> str:
        return self.thumbs.add(("image", i, size or self.size), lambda: self._image(i), size)

    def _geometry(self, condition: str) -> int | None:
        at = self.src.conditions[condition].get("corrupted_at")  # the model's input size, or "original size"
        return at if isinstance(at, int) and not isinstance(at, bool) else None

    def clean_query_class(self, condition: str, i: int) -> str:
        """The clean query image at the geometry its corruption was made at (the model's input crop)."""
        at = self._geometry(condition)
        if at is None:
            return self.image_class(i, self.query_size)

        def make():
            from ..imageperturb.apply import fit_to_input  # lazy: vlbench --help imports this module; keep it light

            return fit_to_input(self._image(i).convert("RGB"), at)

        return self.thumbs.add(("fitted", at, i), make, self.query_size)

    def corrupted_class(self, condition: str, i: int) -> str:
        def make():
            from ..encoding.images import file_key  # lazy: vlbench --help imports this module; keep it light
            from ..imageperturb.apply import CorruptedLoader  # lazy: vlbench --help imports this module; keep it light

            meta = self.src.conditions[condition]
            loader = CorruptedLoader(meta["corruption"], int(meta["severity"]), int(meta.get("seed", 0)),
                                     input_size=self._geometry(condition),
                                     backend=str(meta.get("corrupt_backend") or "reference"))
            return loader(self._image(i), file_key(self.src.image_path(i)))

        return self.thumbs.add(("corrupted", condition, i), make, self.query_size)

    def positives(self, direction: str, q: int) -> set:
        ds = self.ds
        own = {int(ds.caption_to_image[q])} if direction == "t2i" else set(ds.captions_of(q))
        extra = (ds.extra_positives or {}).get(direction)
        if extra is not None:
            if isinstance(extra, dict):
                row = extra[q] if q in extra else extra.get(str(q), ())
            else:
                row = extra[q] if q < len(extra) else ()
            own |= {int(x) for x in row}
        return own


def _shown_images(secs: list, ds) -> set:
    out = set()
    for s in secs:
        for f in s.flips:
            if s.direction == "t2i":
                out |= {int(ds.caption_to_image[f.query]), *f.top_clean, *f.top_condition}
            else:
                out.add(f.query)
    return out


def names(results: dict) -> tuple[str, str]:
    """(model, dataset) as the run named them: --model-name (else the model spec), --dataset-name (else the
    dataset's own name), read from results.json."""
    info, ds = results.get("model") or {}, results.get("dataset") or {}
    label = info.get("label")
    model = label.strip() if isinstance(label, str) and label.strip() else info.get("spec") or info.get("name")
    return str(model or "?"), str(ds.get("name") or "?")


def _intro(src, n: int, seed: int) -> str:
    from .render import esc  # lazy: vlbench --help imports this module; keep it light

    r = src.results
    model, dataset = names(r)
    return (f"<p>run <code>{esc(r.get('run_id'))}</code>: model <b>{esc(model)}</b> on <b>{esc(dataset)}</b>. "
            f"Per condition up to {n} queries that flip at k=1 (seed {seed}): hit \u2192 miss first (the first "
            "positive ranked 1 on clean data, below 1 under the condition), then miss \u2192 hit. Caption "
            "perturbations show t2i queries, image corruptions i2t queries. Green frames and rows: positives. "
            "Ranks: the first positive's 1-based rank, clean \u2192 condition.</p>")


def explain(run_dir, out=None, *, per_perturbation: int = 5, seed: int = 0, images_dir=None, data_dir=None,
            dataset: str | None = None, cache_dir=None, thumb_size: int = 96, log=None) -> Path:
    """Write the failure browser of the run folder ``run_dir``; returns the page's path
    (``out``, default ``<run_dir>/explain.html``)."""
    from ..encoding.index import read_index  # lazy: vlbench --help imports this module; keep it light
    from ..runread import load_run_dataset, read_flips, read_retrieved  # lazy: as above
    from .flips import sections  # lazy: vlbench --help imports this module; keep it light
    from .render import page  # lazy: vlbench --help imports this module; keep it light

    # lazy: vlbench --help imports this module; keep it light
    from .source import (
        RunSource,
        check_image_contents,
        check_images,
        check_retrieved,
        condition_kind,
        image_locator,
        perturbed_texts,
        probe_scores,
    )

    if per_perturbation < 1:
        raise OptionError("per_perturbation", f"{{opt}} must be >= 1, got {per_perturbation}", example=5,
                          flag="--per-perturbation")
    if not 24 <= thumb_size <= 512:
        raise OptionError("thumb_size", f"{{opt}} must be between 24 and 512 pixels, got {thumb_size}", example=96,
                          flag="--thumb-size")
    if out is not None and Path(out).is_dir():
        raise OptionError("out", f"{{opt}} {str(out)!r} is a folder; it names the page to write", example="page.html",
                          flag="--out")
    folder = Path(run_dir)
    results = read_results(folder)
    retrieved = read_retrieved(folder, results)
    if not [c for c, m in (results.get("conditions") or {}).items() if condition_kind(m) != "clean"]:
        raise VlbenchError(f"run {folder} has no condition besides clean: no query can flip, so the page would be "
                           "empty", "explain a run made with --perturb or --perturb-images")
    ds = load_run_dataset(results, dataset=dataset, data_dir=data_dir)
    cache = cache_dir or (results.get("encoding") or {}).get("cache_dir")
    src = RunSource(folder, results, retrieved, ds, image_path=image_locator(ds, images_dir),
                    flip_rows=read_flips(folder, results))
    check_retrieved(src)
    src.perturbed = perturbed_texts(ds, src.conditions, cache_dir=cache, log=log)
    src.probe_scores = probe_scores(folder, results, ds)  # a probe's caption, its probe and both scores
    secs = sections(src, per_perturbation, seed)
    shown = _shown_images(secs, ds)
    check_images(src.image_path, shown, images_dir or ds.image_root)
    _meta, index = read_index(folder)  # the content keys of the images the run evaluated
    check_image_contents(src.image_path, shown, index["image_keys|clean"], images_dir or ds.image_root)
    view = _View(src, thumb_size)
    model, dataset = names(results)
    title = f"{model} on {dataset}: queries the conditions flip"
    text = page(view, secs, title, _intro(src, per_perturbation, seed))
    path = Path(out) if out else folder / DEFAULT_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)
    if log:
        log(f"wrote {path} ({len(text.encode()):,} bytes, {len(view.thumbs.classes)} thumbnails)")
    return path
