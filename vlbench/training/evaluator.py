"""Evaluation during training: :class:`Evaluator`, built once, called with the model in memory at each checkpoint.

Built once: the run's options are checked and resolved (the protocol's presets), and the plan is made: the
dataset (read once, images checked), every condition and the perturbed captions (made once, through the
perturbation cache); the transformed images of image conditions are made at the first call and kept
(kept.py). Each call encodes with the model as it is now (the embedding cache is not used: the weights change
between calls) through the run's own steps (pipeline/runner.py: encode, score, record), so its
numbers are those of ``vlbench run`` on the checkpoint saved at that moment. The model is put in eval mode for
the call and handed back in the mode it came in; nothing of it is written to disk.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from pathlib import Path

from ..encoding.encode import SINGLE, EncodeStats
from ..encoding.session import EncodingSession
from ..errors import OptionError
from ..perturbations.guard import shared_cache
from ..pipeline import presets, runner, timing
from ..pipeline.rerank.checks import check_k, check_k_value
from ..pipeline.rerank.stage import in_memory, run_stage
from ..pipeline.run_config import RunConfig, validate
from ..runfolder import refuse_finished
from ..util import options as option_table
from .adapters import Held, as_adapter
from .kept import kept_plan

#: the keywords of vlbench.run that the Evaluator refuses (the option table's rows without "evaluator"): the model
#: comes at each call; each call writes a new folder, so there is nothing to resume or overwrite
_NOT_HERE = frozenset(o.field for o in option_table.applying("api") if "evaluator" not in o.where)


def _checked_out(out) -> Path | None:
    """``out`` as a folder each call can write ``step-<step>`` into, or an OptionError naming what is in the
    way (a file at ``out`` or above it, a folder without write permission), before any work is done."""
    if not out:
        return None
    path = Path(out)
    fix = "give a folder (each call writes its run into out/step-<step>), or leave out= out to keep no files"
    if path.exists() and not path.is_dir():
        raise OptionError("out", f"{{opt}} {str(path)!r} is a file, not a folder", fix)
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise OptionError("out", f"{{opt}} {str(path)!r} cannot be made: {str(existing)!r} is a file", fix)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OptionError("out", f"{{opt}} {str(path)!r} cannot be written: no write permission on "
                                 f"{str(existing)!r}", "give a folder you can write to")
    return path


class Evaluator:
    """``Evaluator("custom:data/val.jsonl", perturb="typos", perturb_images="gaussian_noise:3", out="evals",
    report_to="wandb")``, then ``evaluator(model, preprocess=..., tokenizer=..., step=1000)`` at each checkpoint
    (open_clip), ``evaluator(model, processor=processor, step=...)`` (transformers) or ``evaluator(adapter)``.

    ``options``: any option of :func:`vlbench.run` but ``model`` (quiet by default). ``out``: each call writes its
    run folder to ``out/step-<step>`` (``out/call-<n>`` without a step); without ``out`` the files go to a
    temporary folder removed after the call (the returned record is all there is). ``report_to`` (and
    ``project``): the trackers every call reports to, at its step. Each call returns the
    :class:`~vlbench.RunResult` (``.record.values``: the metric records)."""

    def __init__(self, dataset: str, *, out: str | None = None, report_to=(), project: str | None = None,
                 **options):
        if "model" in options:
            raise OptionError("model", "the Evaluator takes its model at each call, not as {opt}",
                              "call evaluator(model, ...) at each checkpoint")
        for name in sorted(_NOT_HERE - {"model"}):  # the option table's rows that do not apply to the Evaluator
            if options.get(name):
                raise OptionError(name, "{opt} does not apply to the Evaluator: each call writes a new folder")
        options.setdefault("quiet", True)
        #: rerank=: a pair scorer's spec (as vlbench.run takes it) or a PairScorer in memory, used at every call
        self._scorer, k = None, None
        if options.get("rerank") is not None and not isinstance(options["rerank"], str):
            self._scorer, k = in_memory(options.pop("rerank")), options.pop("rerank_k", None)
        cfg = RunConfig(model="in-memory", dataset=dataset, report_to=report_to, **options)
        validate(cfg)
        if self._scorer is not None:  # K checked as for a spec (the scorer's own name need not be registered)
            check_k_value(k)
            cfg = dataclasses.replace(cfg, rerank_k=k)
        self.out = _checked_out(out)  # before the plan (perturbations, images) and every call's encoding
        self.cfg = presets.resolve(cfg)
        self._trackers = None
        if self.cfg.report_to:  # their start-up in a background thread while the plan is made and the model trains
            from ..trackers import start  # lazy: only with report_to

            self._trackers = start(self.cfg.report_to)
        self.project = project
        self.calls = 0
        with self._minilm():
            plan = timing.timed("perturbation", lambda: runner.make_plan(self.cfg))
        check_k(dataclasses.replace(self.cfg, rerank=self.cfg.rerank or (self._scorer and "in-memory")), plan.ds)
        #: the transformed images of image conditions (corruptions, probes), made at the first call, kept here
        self._images = tempfile.TemporaryDirectory(prefix="vlbench-eval-images-")
        self.plan = kept_plan(plan, self._images.name)

    def _minilm(self):
        """The guard's and validity's MiniLM vectors in the options' cache folder (as a run keeps them)."""

        if not self.cfg.perturb and not self.cfg.probes:  # probes: their validity reads MiniLM vectors too
            return contextlib.nullcontext()
        return shared_cache().configured(self.cfg.cache_dir, disk=not self.cfg.no_cache)

    def __call__(self, model, *, preprocess=None, tokenizer=None, processor=None, step: int | None = None,
                 label: str | None = None):
        """Evaluate ``model`` as it is now; returns the RunResult of this checkpoint (and reports it)."""
        adapter = as_adapter(model, preprocess=preprocess, tokenizer=tokenizer, processor=processor, label=label)
        self.calls += 1
        name = f"step-{int(step)}" if step is not None else f"call-{self.calls}"
        spec = label or getattr(adapter, "checkpoint", None) or type(adapter).__name__
        spec = spec if ":" in spec else f"{adapter.name}:{spec}"
        cfg = dataclasses.replace(self.cfg, model=spec, model_name=f"{spec} {name}",
                                  device=str(getattr(adapter, "device", "cpu")),
                                  precision=getattr(adapter, "precision", None) or self.cfg.precision)
        if self.out is not None:  # before the model is put in eval mode and anything is encoded
            _checked_out(self.out)  # (removed or replaced by a file since the Evaluator was built)
            refuse_finished(self.out / name)
        training = getattr(model, "training", None)
        if training is not None:
            model.eval()
        temp = None if self.out else tempfile.TemporaryDirectory(prefix="vlbench-eval-")
        try:
            cfg = dataclasses.replace(cfg, out=str((self.out or Path(temp.name)) / name))  # type: ignore[union-attr]
            held = Held(adapter, spec)
            held.threads = cfg.threads  # the forward's CPU threads, as a run's (None: the run's default rule)
            result = self._evaluate(cfg, held)
            if cfg.report_to:
                from ..trackers import report  # lazy: only with report_to

                report(result, cfg.report_to, project=self.project, step=step, quiet=cfg.quiet, started=self._trackers)
            return result
        finally:
            if training:
                model.train()
            if temp is not None:
                temp.cleanup()

    def _evaluate(self, cfg: RunConfig, held: Held):
        timing.start("other")
        session = EncodingSession(held, None, EncodeStats(), held.model_hash())
        with self._minilm():
            enc = runner.encode(cfg, self.plan, SINGLE, None, session=session)
            evals = timing.timed("scoring", lambda: runner.score(cfg, enc.plan, enc), len)
            reranked = timing.timed("rerank", lambda: run_stage(cfg, enc.plan, enc, evals, scorer=self._scorer))
            return runner.record(cfg, enc.plan, enc, evals, reranked)
