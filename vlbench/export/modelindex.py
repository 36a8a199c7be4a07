"""A finished run as Hugging Face model-card metadata, built with ``huggingface_hub``'s own classes.

* the ``model-index`` block (``EvalResult`` -> ``ModelCardData`` -> ``ModelCard``): one result per condition
  (clean and each perturbation) and selected metric record (``--metrics``; by default MTEB's main score,
  binary nDCG@10, and Recall@1/5/10 of each direction: :data:`DEFAULT_METRICS`);
* the Hub's newer evaluation-results file, ``.eval_results/vlbench_<dataset>.yaml`` (``EvalResultEntry`` and
  ``eval_result_entries_to_yaml``, documented in ``huggingface_hub._eval_results``).

The mapping (docs/export.md): task ``image-text-retrieval``; dataset type = the dataset's id (``hf:ORG/NAME`` as
``ORG/NAME``, a built-in by its vlbench name), config = the condition (``clean`` or the perturbation: the Hub groups
a model-index by task, dataset type, config, split and revision, so each condition is its own result), split = the
gallery, revision = the dataset's content hash; metric type = vlbench's key rendered at the edge
(``t2i_recall@5``, ``i2t_medr``, ``both_rsum``), value = results.json's value as it is (Recall@k in percent).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from ..errors import OptionError, VlbenchError
from ..pipeline.rerank.readback import second_stage, stages_text
from ..plugins.exporter import ExportRequest
from ..results import MetricKey, RunRecord
from ..util.io import atomic_write_text

TASK_TYPE = "image-text-retrieval"
TASK_NAME = "Image-Text Retrieval"
#: the metrics a card gets unless ``--metrics`` says otherwise: MTEB's main score of image-text retrieval (binary
#: nDCG@10, when the run has it) and Recall@1/5/10, each of both directions; one scale (higher is better, 0-100 or
#: 0-1 as results.json has it), no ranks (MedR, MeanR), no sums (RSUM)
DEFAULT_METRICS = ("ndcg_binary@10", "recall@1", "recall@5", "recall@10")
#: the first line of the body of every card vlbench writes: a README.md without it is someone's own text
MARKER = "<!-- written by vlbench export: a later export replaces this file -->"


def eval_results_path(record: RunRecord) -> str:
    """``.eval_results/vlbench_<dataset>.yaml``: one file per dataset, so results on several datasets sit side by
    side in a repository (a later export of the same dataset replaces its file)."""
    slug = re.sub(r"[^0-9A-Za-z._-]+", "_", record.dataset.name).strip("_.") or "dataset"
    return f".eval_results/vlbench_{slug}.yaml"


def metric_type(direction: str, metric: str, k: int | None) -> str:
    """vlbench's structured key rendered as results tables render it: ``t2i_recall@5``."""
    return f"{direction}_{metric}" + ("" if k is None else f"@{k}")


def _matches(selector: str, key: MetricKey) -> bool:
    """``recall@5`` (either direction), ``t2i_recall@5``, ``recall`` (every k) or ``t2i_recall``."""
    bare = key.metric + ("" if key.k is None else f"@{key.k}")
    return selector in (bare, key.metric, f"{key.direction}_{bare}", f"{key.direction}_{key.metric}")


def selection(record: RunRecord, metrics: tuple[str, ...] | None) -> Callable[[MetricKey], bool]:
    """Which metric records go into the card: ``metrics`` (``--metrics``: selectors, or ``("all",)``), None for
    :data:`DEFAULT_METRICS`. A selector that matches no record of the run is an OptionError listing those it has."""
    if metrics is not None and [m.strip().lower() for m in metrics] == ["all"]:
        return lambda key: True
    keys = {key for cond in record.condition_names() for key in record.values_of(cond)}
    chosen = tuple(m.strip().lower() for m in (metrics if metrics is not None else DEFAULT_METRICS) if m.strip())
    have = ", ".join(sorted({k.metric + ("" if k.k is None else f"@{k.k}") for k in keys}))
    for selector in chosen if metrics is not None else ():
        if not any(_matches(selector, key) for key in keys):
            raise OptionError("metrics", f"{{opt}} {selector!r} matches no metric record of the run",
                              f"choose among {have} (a direction prefix such as t2i_ selects one direction; 'all' "
                              "every record)", example="recall@1,recall@5,recall@10", flag="--metrics")
    if not any(_matches(sel, key) for sel in chosen for key in keys):
        raise OptionError("metrics", f"the run has none of the metrics {{opt}} selects ({', '.join(chosen)})",
                          f"choose among {have}", example="all", flag="--metrics")
    return lambda key: any(_matches(sel, key) for sel in chosen)


def dataset_id(record: RunRecord) -> str:
    name = record.dataset.name
    if name.startswith("hf:"):
        return name[3:].split("?", 1)[0]
    return name


def _args(record: RunRecord, condition: str) -> dict | None:
    if condition == "clean":
        return None
    meta = record.condition(condition).meta
    keep = ("perturbation", "family", "version", "params", "seed", "captions_hash")
    return {k: meta[k] for k in keep if meta.get(k) is not None} or None


def eval_results(record: RunRecord, metrics: tuple[str, ...] | None = None) -> list:
    """One ``huggingface_hub.EvalResult`` per selected metric record of the run (null values left out)."""
    from huggingface_hub import EvalResult

    split = record.dataset.fields.get("gallery") or "test"
    keep = selection(record, metrics)
    out = []
    for cond in record.condition_names():
        for key, value in record.values_of(cond).items():
            if value is None or not keep(key):
                continue
            out.append(EvalResult(
                task_type=TASK_TYPE, task_name=TASK_NAME, dataset_type=dataset_id(record),
                dataset_name=f"{record.dataset.name} ({cond})", dataset_config=cond, dataset_split=split,
                dataset_revision=record.dataset.hash, dataset_args=_args(record, cond),
                metric_type=metric_type(key.direction, key.metric, key.k), metric_value=float(value),
                metric_name=metric_type(key.direction, key.metric, key.k) + ("" if cond == "clean" else f" ({cond})")))
    return out


def model_card(record: RunRecord, name: str, existing: str | None = None, metrics: tuple[str, ...] | None = None):
    """A ``huggingface_hub.ModelCard`` whose model-index holds the run's results: ``existing`` (a README.md's text)
    keeps its own text and metadata, its results for the same (task, dataset, config, split, revision) replaced."""
    from huggingface_hub import ModelCard, ModelCardData

    new = eval_results(record, metrics)
    if existing:
        card = ModelCard(existing, ignore_metadata_errors=True)
        mine = {r.unique_identifier for r in new}
        kept = [r for r in (card.data.eval_results or []) if r.unique_identifier not in mine]
        card.data.eval_results = kept + new
        card.data.model_name = card.data.model_name or name
        return card
    data = ModelCardData(model_name=name, eval_results=new)
    body = (f"{MARKER}\n\n# {name}\n\nImage-text retrieval results of `{record.model.spec}` measured with vlbench "
            f"{record.vlbench_version or ''} (run `{record.run_id}`) on {record.dataset.name}, clean and under "
            f"{len(record.condition_names()) - 1} perturbation condition(s).\n")
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}")


def eval_results_yaml(record: RunRecord, metrics: tuple[str, ...] | None = None) -> str:
    """The Hub's ``.eval_results/*.yaml`` file of the run: one entry per selected metric record (``task_id`` =
    ``<condition>/<metric type>``), built with huggingface_hub's ``EvalResultEntry``."""
    import yaml
    from huggingface_hub import EvalResultEntry, eval_result_entries_to_yaml

    created = record.created
    keep = selection(record, metrics)
    entries = [EvalResultEntry(dataset_id=dataset_id(record), task_id=f"{cond}/{metric_type(*key)}",
                               value=float(value), dataset_revision=record.dataset.hash, date=created,
                               notes=f"vlbench {record.vlbench_version or ''} run {record.run_id}".strip())
               for cond in record.condition_names() for key, value in record.values_of(cond).items()
               if value is not None and keep(key)]
    return yaml.safe_dump(eval_result_entries_to_yaml(entries), sort_keys=False)


def write(record: RunRecord, out: str, name: str, metrics: tuple[str, ...] | None = None,
          overwrite: bool = False) -> list[str]:
    """README.md (a model card with the model-index) and the .eval_results file under ``out``. A README.md there
    that vlbench did not write (no :data:`MARKER`) is someone's own card: refused unless ``overwrite``."""
    readme = os.path.join(out, "README.md")
    if os.path.exists(readme) and not overwrite:
        try:
            with open(readme, encoding="utf-8", errors="replace") as fh:
                ours = MARKER in fh.read()
        except OSError as exc:
            raise VlbenchError(f"{readme} cannot be read ({exc.strerror})", "choose another --out") from None
        if not ours:
            raise VlbenchError(f"{readme} exists and was not written by vlbench export: it would be replaced",
                               "choose another --out, or pass --overwrite to replace it (--push-to-hub merges the "
                               "results into a repository's own card instead)")
    card = model_card(record, name, metrics=metrics)
    results_text = eval_results_yaml(record, metrics)
    os.makedirs(os.path.join(out, ".eval_results"), exist_ok=True)
    atomic_write_text(readme, str(card))
    results = os.path.join(out, eval_results_path(record))
    atomic_write_text(results, results_text)
    return [readme, results]


class ModelIndexExporter:
    description = "a Hugging Face model card's model-index and the Hub's .eval_results file (--metrics selects)"
    run_kinds = ("retrieval",)

    def export(self, request: ExportRequest) -> list:
        second = second_stage(request.record)
        if second:  # a model card is the card of the model: its own (first-stage) numbers, said
            request.note(f"note: a two-stage run ({stages_text(request.record)}): the model card holds its first "
                         "stage's numbers, the model's own; the final ranking's are in results.json rerank (and "
                         f"'--format mteb' exports them under '{request.model_name} + {second}')")
        return write(request.record, str(request.out), request.model_name, request.metrics, request.overwrite)


EXPORTER = ModelIndexExporter()
