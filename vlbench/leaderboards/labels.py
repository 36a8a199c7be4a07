"""Display labels of models and datasets in a leaderboard, and the refusal to mix incomparable results."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import VlbenchError
from .store import Run, Selection


@dataclass
class Labels:
    model: dict[str, str]  # model hash -> label
    dataset: dict[tuple, str]  # (name, hash) -> label
    mixed: list[dict]  # what is mixed (empty when nothing is)
    flags: dict[str, list[str]]  # run path -> flags

    def run_flags(self, *runs: Run) -> str:
        out = set()
        for r in runs:
            if r is not None:
                out.update(self.flags.get(r.path, []))
        return "; ".join(sorted(out))


def _short(h: str) -> str:
    return h[:8]


def _model_labels(runs: list[Run]) -> dict[str, str]:
    """Model labels: the spec (or --model-name) of the newest run with that hash; runs of one label with
    different hashes get their precision when that tells them apart, else the short hash."""
    newest: dict[str, Run] = {}
    for r in runs:
        if r.model_hash not in newest or r.newness() > newest[r.model_hash].newness():
            newest[r.model_hash] = r
    by_label: dict[str, list[str]] = {}
    for h, r in newest.items():
        by_label.setdefault(r.model_label, []).append(h)
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


def _mixed_protocols(protocols: dict, mixed: list, flags: dict) -> None:
    if len(protocols) > 1:
        _note_mixed(mixed, flags, {"what": "protocol"}, protocols, lambda v: f"mixed: protocol {v}")


def _mixed(hashes: dict, versions: dict) -> tuple[list[dict], dict]:
    """What is mixed among the used runs (dataset hashes, metric versions), and the flags per run path."""
    mixed, flags = [], {}
    for name in sorted(hashes):
        if len(hashes[name]) > 1:
            _note_mixed(mixed, flags, {"what": "dataset_hash", "dataset": name}, hashes[name],
                        lambda h: f"mixed: dataset hash {_short(h)}")
    if len(versions) > 1:
        _note_mixed(mixed, flags, {"what": "metric_version"}, versions, lambda v: f"mixed: metric version {v}")
    return mixed, flags


def _refuse_mixed(mixed: list[dict], hashes: dict, versions: dict) -> None:
    lines = []
    for m in mixed:
        if m["what"] == "dataset_hash":
            lines.append(f"dataset {m['dataset']!r} has {len(m['variants'])} different content hashes "
                         "(its captions or images changed between runs):")
            for h, ids in m["variants"].items():
                lines.append(f"    {_short(h)}: " + _name_runs(hashes[m["dataset"]][h]))
        elif m["what"] == "protocol":
            lines.append(f"the runs use {len(m['variants'])} different evaluation protocols (--protocol):")
            for v, ids in m["variants"].items():
                lines.append(f"    protocol {v}: " + ", ".join(ids))
        else:
            lines.append(f"the runs use {len(m['variants'])} different metric versions:")
            for v, ids in m["variants"].items():
                lines.append(f"    metric version {v}: " + _name_runs(versions[v]))
    raise VlbenchError("refusing to put incomparable results side by side:\n  " + "\n  ".join(lines),
                       "if these are different datasets (e.g. two manifests that share a file name), give each "
                       "its own name: vlbench run --dataset-name NAME; otherwise build these runs into separate "
                       "leaderboards, re-run the old ones, or pass --allow-mixed to show them side by side, marked")


def make_labels(runs: list[Run], selection: Selection, allow_mixed: bool) -> Labels:
    """Display labels for models and datasets, and the refusal to mix incomparable results.

    Runs are comparable when every run of one dataset name has the same dataset content hash and all
    runs share one metric version and one evaluation protocol. Otherwise the build stops, naming the runs, unless ``allow_mixed``:
    then datasets with several hashes are shown as ``name [hash8]`` and rows are flagged.
    """
    hashes: dict[str, dict[str, list[Run]]] = {}
    versions: dict[str, list[Run]] = {}
    protocols: dict[str, list[Run]] = {}
    for r in selection.used_runs():
        hashes.setdefault(r.dataset_name, {}).setdefault(r.dataset_hash, []).append(r)
        versions.setdefault(r.metric_version, []).append(r)
        protocols.setdefault(protocol_of(r), []).append(r)
    mixed, flags = _mixed(hashes, versions)
    _mixed_protocols(protocols, mixed, flags)
    if mixed and not allow_mixed:
        _refuse_mixed(mixed, hashes, versions)
    dataset = {}
    for name, hs in hashes.items():
        for h in hs:
            dataset[(name, h)] = name if len(hs) == 1 else f"{name} [{_short(h)}]"
    return Labels(_model_labels(runs), dataset, mixed, flags)


def _name_runs(runs: list[Run]) -> str:
    return ", ".join(f"{r.ref} ({r.path})" for r in sorted(runs, key=lambda r: (r.ref, r.path)))
