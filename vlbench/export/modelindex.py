"""A finished run as Hugging Face model-card metadata, built with ``huggingface_hub``'s own classes.

* the ``model-index`` block (``EvalResult`` -> ``ModelCardData`` -> ``ModelCard``): one result per condition
  (clean and each perturbation), every metric record of both directions in it;
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

from ..results import RunRecord
from ..util.io import atomic_write_text

TASK_TYPE = "image-text-retrieval"
TASK_NAME = "Image-Text Retrieval"


def eval_results_path(record: RunRecord) -> str:
    """``.eval_results/vlbench_<dataset>.yaml``: one file per dataset, so results on several datasets sit side by
    side in a repository (a later export of the same dataset replaces its file)."""
    slug = re.sub(r"[^0-9A-Za-z._-]+", "_", record.dataset.name).strip("_.") or "dataset"
    return f".eval_results/vlbench_{slug}.yaml"


def metric_type(direction: str, metric: str, k: int | None) -> str:
    """vlbench's structured key rendered as results tables render it: ``t2i_recall@5``."""
    return f"{direction}_{metric}" + ("" if k is None else f"@{k}")


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


def eval_results(record: RunRecord) -> list:
    """One ``huggingface_hub.EvalResult`` per metric record of the run (null values left out)."""
    from huggingface_hub import EvalResult

    split = record.dataset.fields.get("gallery") or "test"
    out = []
    for cond in record.condition_names():
        for key, value in record.values_of(cond).items():
            if value is None:
                continue
            out.append(EvalResult(
                task_type=TASK_TYPE, task_name=TASK_NAME, dataset_type=dataset_id(record),
                dataset_name=f"{record.dataset.name} ({cond})", dataset_config=cond, dataset_split=split,
                dataset_revision=record.dataset.hash, dataset_args=_args(record, cond),
                metric_type=metric_type(key.direction, key.metric, key.k), metric_value=float(value),
                metric_name=metric_type(key.direction, key.metric, key.k) + ("" if cond == "clean" else f" ({cond})")))
    return out


def model_card(record: RunRecord, name: str, existing: str | None = None):
    """A ``huggingface_hub.ModelCard`` whose model-index holds the run's results: ``existing`` (a README.md's text)
    keeps its own text and metadata, its results for the same (task, dataset, config, split, revision) replaced."""
    from huggingface_hub import ModelCard, ModelCardData

    new = eval_results(record)
    if existing:
        card = ModelCard(existing, ignore_metadata_errors=True)
        mine = {r.unique_identifier for r in new}
        kept = [r for r in (card.data.eval_results or []) if r.unique_identifier not in mine]
        card.data.eval_results = kept + new
        card.data.model_name = card.data.model_name or name
        return card
    data = ModelCardData(model_name=name, eval_results=new)
    body = (f"# {name}\n\nImage-text retrieval results of `{record.model.spec}` measured with vlbench "
            f"{record.vlbench_version or ''} (run `{record.run_id}`) on {record.dataset.name}, clean and under "
            f"{len(record.condition_names()) - 1} perturbation condition(s).\n")
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}")


def eval_results_yaml(record: RunRecord) -> str:
    """The Hub's ``.eval_results/*.yaml`` file of the run: one entry per metric record (``task_id`` =
    ``<condition>/<metric type>``), built with huggingface_hub's ``EvalResultEntry``."""
    import yaml
    from huggingface_hub import EvalResultEntry, eval_result_entries_to_yaml

    created = record.created
    entries = [EvalResultEntry(dataset_id=dataset_id(record), task_id=f"{cond}/{metric_type(*key)}",
                               value=float(value), dataset_revision=record.dataset.hash, date=created,
                               notes=f"vlbench {record.vlbench_version or ''} run {record.run_id}".strip())
               for cond in record.condition_names() for key, value in record.values_of(cond).items()
               if value is not None]
    return yaml.safe_dump(eval_result_entries_to_yaml(entries), sort_keys=False)


def write(record: RunRecord, out: str, name: str) -> list[str]:
    """README.md (a model card with the model-index) and the .eval_results file under ``out``."""
    os.makedirs(os.path.join(out, ".eval_results"), exist_ok=True)
    readme = os.path.join(out, "README.md")
    atomic_write_text(readme, str(model_card(record, name)))
    results = os.path.join(out, eval_results_path(record))
    atomic_write_text(results, eval_results_yaml(record))
    return [readme, results]
