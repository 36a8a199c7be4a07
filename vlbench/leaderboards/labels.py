"""Display labels of models and datasets in a leaderboard, and the refusal to mix incomparable results."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import VlbenchError
from ..pipeline.rerank.readback import stages_text
from .store import Run, Selection


@dataclass
class Labels:
    model: dict[str, str]  # model hash -> label
    dataset: dict[tuple, str]  # (name, hash) -> label
    mixed: list[dict]  # what is mixed (empty when nothing is)
    flags: dict[str, list[str]]  # run path -> flags
    #: keep local paths in model specs (``--keep-local-paths``); otherwise ``clip:/home/u/my-clip`` -> ``clip:my-clip``
    keep_paths: bool = False
    #: model hash -> its kind and stages (:func:`stages_of`); empty when every model is a dual encoder, so that a
    #: board of dual encoders has no stages column (and rebuilds byte for byte as before)
    stages: dict[str, str] = field(default_factory=dict)

    def run_flags(self, *runs: Run) -> str:
        out = set()
        for r in runs:
            if r is not None:
                out.update(self.flags.get(r.path, []) + list(r.integrity))
        return "; ".join(sorted(out))

    def spec(self, run: Run) -> str:
        """The run's model spec as tables show it (local paths shortened unless ``keep_paths``)."""
        return run.model_spec if self.keep_paths else public_spec(run.model_spec)


def stages_of(run: Run) -> str:
    """The model kind and stages of a leaderboard entry: ``dual``, ``multi-vector``, ``MLLM embedder``, ``pair``; a
    two-stage run's final ranking ``dual + blip-itm@K16`` (its first stage is an entry of the plain kind)."""
    return stages_text(run.record, final=run.stage == "final")


STAGES_COLUMN = "stages"
STAGES_LABEL = "kind / stages"


def stage_map(runs: list[Run]) -> dict[str, str]:
    """{model hash: stages} of the runs, or {} when every one is a one-stage dual encoder."""
    out = {r.model_hash: stages_of(r) for r in sorted(runs, key=lambda r: (r.ref, r.path))}
    return out if any(v != "dual" for v in out.values()) else {}


def public_spec(spec: str) -> str:
    """A model spec without local paths: ``clip:/home/u/ckpt/my-clip`` -> ``clip:my-clip`` (the folder's name);
    registry names (``hf:org/name``, ``openclip:ViT-B-32/openai``) are kept as they are."""
    prefix, sep, rest = spec.partition(":")
    if not sep:
        prefix, rest = "", spec
    drive = len(rest) > 2 and rest[1] == ":" and rest[2] in "/\\"  # C:\\models\\my-clip
    if (rest.startswith(("/", "~", "./", "../", "\\")) and not rest.startswith("//")) or drive:
        name = rest.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1] or "model"
        return f"{prefix}{sep}{name}"
    return spec


def _short(h: str) -> str:
    return h[:8]


def _model_labels(runs: list[Run], keep_paths: bool = False) -> dict[str, str]:
    """Model labels: the --model-name of the newest run with that hash that was given one, else the spec of
    the newest run (an explicit name is never replaced by a newer run's bare spec); runs of one label with
    different hashes get their precision when that tells them apart, else the short hash."""
    newest: dict[str, Run] = {}
    named: dict[str, Run] = {}
    for r in runs:
        if r.model_hash not in newest or r.newness() > newest[r.model_hash].newness():
            newest[r.model_hash] = r
        given = r.record.model.fields.get("label")
        if isinstance(given, str) and given.strip() and (r.model_hash not in named or
                                              r.newness() > named[r.model_hash].newness()):
            named[r.model_hash] = r
    by_label: dict[str, list[str]] = {}
    for h, r in newest.items():
        lab = named[h].model_label if h in named else r.model_spec if keep_paths else public_spec(r.model_spec)
        if h not in named and r.stage == "final":  # a two-stage run's final ranking: "clip:x + blip-itm@K16"
            lab += f" + {r.record.other['stage']['second_stage']}"
        by_label.setdefault(lab, []).append(h)
    model = {}
    for lab, hashes in by_label.items():
        precisions = {h: str(newest[h].record.settings.get("precision") or "") for h in hashes}
        by_precision = len(set(precisions.values())) == len(hashes)  # e.g. the same spec in fp32 and fp16
        for h in hashes:
            model[h] = lab if len(hashes) == 1 else f"{lab} [{precisions[h] if by_precision else _short(h)}]"
    return model


def protocol_of(run: Run) -> str:
    """The run's evaluation protocol (settings.protocol.name); runs before protocols were recorded: standard."""
    proto = run.record.settings.get("protocol")
    return proto.get("name", "standard") if isinstance(proto, dict) else "standard"


def _note_mixed(mixed: list, flags: dict, entry: dict, groups: dict, flag) -> None:
    """One ``mixed`` entry for runs that differ in one respect (``groups``: variant -> runs), and the flag
    ``flag(variant)`` on each of those runs."""
    mixed.append({**entry, "variants": {v: sorted(x.ref for x in rs) for v, rs in sorted(groups.items())}})
    for v, rs in groups.items():
        for x in rs:
            flags.setdefault(x.path, []).append(flag(v))


def geometry_of(run: Run) -> str | None:
    """Where the run's image corruptions were applied: "input" (the model's input geometry, ImageNet-C),
    "original" (the decoded image's own size), "unrecorded" (runs before it was recorded); None without any."""
    seen = None
    for c in run.conditions():
        meta = run.condition_meta(c)
        if meta.get("kind") == "image" or meta.get("condition_kind") == "image":  # a choice task's: condition_kind
            at = meta.get("corrupted_at")
            seen = "original" if at == "original size" else "input" if isinstance(at, int) else \
                "unrecorded" if at is None else str(at)
    return seen


def backend_of(run: Run) -> str | None:
    """The code that made the run's image corruptions (``--corrupt-backend``): "reference" (also runs before it
    was recorded) or "torch"; None without image corruptions."""
    seen = None
    for c in run.conditions():
        meta = run.condition_meta(c)
        if (meta.get("kind") == "image" or meta.get("condition_kind") == "image") and "corruption" in meta:
            seen = str(meta.get("corrupt_backend") or "reference")
    return seen


def _mixed_protocols(protocols: dict, geometries: dict, mixed: list, flags: dict, backends: dict) -> None:
    """Protocols and corruption geometries are compared over every run given, superseded ones included, so a
    clash is reported the same way whichever run is newer."""
    if len(protocols) > 1:
        _note_mixed(mixed, flags, {"what": "protocol"}, protocols, lambda v: f"mixed: protocol {v}")
    if len(geometries) > 1:
        _note_mixed(mixed, flags, {"what": "corruption_geometry"}, geometries,
                    lambda v: f"mixed: images corrupted at {v} geometry")
    if len(backends) > 1:
        _note_mixed(mixed, flags, {"what": "corruption_backend"}, backends,
                    lambda v: f"mixed: images corrupted by the {v} backend")


def _mixed(hashes: dict, versions: dict) -> tuple[list[dict], dict]:
    """What is mixed among the used runs (dataset hashes, metric versions), and the flags per run path."""
    mixed: list = []
    flags: dict = {}
    for name in sorted(hashes):
        if len(hashes[name]) > 1:
            _note_mixed(mixed, flags, {"what": "dataset_hash", "dataset": name}, hashes[name],
                        lambda h: f"mixed: dataset hash {_short(h)}")
    if len(versions) > 1:
        _note_mixed(mixed, flags, {"what": "metric_version"}, versions, lambda v: f"mixed: metric version {v}")
    return mixed, flags


def _refuse_mixed(mixed: list[dict], hashes: dict, versions: dict, others: dict) -> None:
    lines = []
    for m in mixed:
        if m["what"] == "dataset_hash":
            lines.append(f"dataset {m['dataset']!r} has {len(m['variants'])} different content hashes "
                         "(its captions or images changed between runs):")
            for h in m["variants"]:
                lines.append(f"    {_short(h)}: " + _name_runs(hashes[m["dataset"]][h]))
        elif m["what"] in ("protocol", "corruption_geometry", "corruption_backend"):
            what = {"protocol": "different evaluation protocols (--protocol)",
                    "corruption_geometry": "different image-corruption geometries (--corrupt-at input / original)",
                    "corruption_backend": "different image-corruption backends (--corrupt-backend reference / "
                                          "torch)"}[m["what"]]
            lines.append(f"the runs use {len(m['variants'])} {what}:")
            for v in m["variants"]:
                lines.append(f"    {m['what'].replace('_', ' ')} {v}: " + _name_runs(others[m["what"]][v]))
        else:
            lines.append(f"the runs use {len(m['variants'])} different metric versions:")
            for v in m["variants"]:
                lines.append(f"    metric version {v}: " + _name_runs(versions[v]))
    raise VlbenchError("refusing to put incomparable results side by side:\n  " + "\n  ".join(lines),
                       "if these are different datasets (e.g. two manifests that share a file name), give each "
                       "its own name: vlbench run --dataset-name NAME; otherwise build these runs into separate "
                       "leaderboards, re-run the old ones, or pass --allow-mixed to show them side by side, marked")


def make_labels(runs: list[Run], selection: Selection, allow_mixed: bool, keep_paths: bool = False) -> Labels:
    """Display labels for models and datasets, and the refusal to mix incomparable results.

    Runs are comparable when every run of one dataset name has the same dataset content hash and all
    runs share one metric version, and all runs given (superseded ones included) one evaluation protocol and
    one image-corruption geometry and backend. Otherwise the build stops, naming the runs, unless ``allow_mixed``:
    then datasets with several hashes are shown as ``name [hash8]`` and rows are flagged.
    """
    hashes: dict[str, dict[str, list[Run]]] = {}
    versions: dict[str, list[Run]] = {}
    protocols: dict[str, list[Run]] = {}
    geometries: dict[str, list[Run]] = {}
    backends: dict[str, list[Run]] = {}
    for r in selection.used_runs():
        hashes.setdefault(r.dataset_name, {}).setdefault(r.dataset_hash, []).append(r)
        versions.setdefault(r.metric_version, []).append(r)
    for r in sorted(runs, key=lambda r: (r.ref, r.path)):
        protocols.setdefault(protocol_of(r), []).append(r)
        if (geometry := geometry_of(r)) is not None:
            geometries.setdefault(geometry, []).append(r)
        if (backend := backend_of(r)) is not None:
            backends.setdefault(backend, []).append(r)
    mixed, flags = _mixed(hashes, versions)
    _mixed_protocols(protocols, geometries, mixed, flags, backends)
    if mixed and not allow_mixed:
        _refuse_mixed(mixed, hashes, versions, {"protocol": protocols, "corruption_geometry": geometries,
                                                "corruption_backend": backends})
    dataset = {}
    for name, hs in hashes.items():
        for h in hs:
            dataset[(name, h)] = name if len(hs) == 1 else f"{name} [{_short(h)}]"
    return Labels(_model_labels(runs, keep_paths), dataset, mixed, flags, keep_paths, stage_map(runs))


def _name_runs(runs: list[Run]) -> str:
    """The run folders as the user named them (RESULTS arguments or below them)."""
    return ", ".join(f"{r.shown} (run {r.ref})" for r in sorted(runs, key=lambda r: (r.shown, r.path)))
