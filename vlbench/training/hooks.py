"""Hooks that call an :class:`~vlbench.training.Evaluator` from a training loop.

* Hugging Face ``Trainer``: :class:`VlbenchCallback` (``trainer.add_callback(VlbenchCallback(evaluator,
  processor))``) evaluates at each evaluation (``on_evaluate``) and, when asked, at each save (``on_save``),
  on the main process only, and adds every metric record to the evaluation's metrics (``vlbench/...``: what
  ``trainer.evaluate()`` returns; the Trainer has logged its own by then, so trackers get vlbench's numbers through
  the Evaluator's ``report_to``).
* open_clip's training loop (``open_clip_train/main.py``): a few lines after each epoch's evaluation,
  :func:`openclip_step` (docs/training.md shows them).
"""

from __future__ import annotations

from transformers import TrainerCallback

from ..trackers import metrics_of


def openclip_step(evaluator, model, preprocess, tokenizer, step: int, *, is_master: bool = True):
    """One evaluation from open_clip's training loop: the model unwrapped from DDP (``model.module``), evaluated
    by the main process only; returns the RunResult (None on other processes)."""
    if not is_master:
        return None
    return evaluator(getattr(model, "module", model), preprocess=preprocess, tokenizer=tokenizer, step=step)


class VlbenchCallback(TrainerCallback):
    """Runs ``evaluator`` on the Trainer's model at each evaluation (``at=("evaluate",)``, the default) and/or
    each checkpoint save (``"save"``); ``results`` keeps every call's RunResult."""

    def __init__(self, evaluator, processor=None, *, at=("evaluate",), prefix: str = "vlbench/"):
        unknown = set(at) - {"evaluate", "save"}
        if unknown:
            raise ValueError(f"VlbenchCallback(at=...) takes 'evaluate' and/or 'save', not {sorted(unknown)}")
        self.evaluator, self.processor, self.at, self.prefix = evaluator, processor, tuple(at), prefix
        self.results: list = []

    def _run(self, state, model, metrics=None):
        if model is None or not state.is_world_process_zero:
            return
        result = self.evaluator(getattr(model, "module", model), processor=self.processor, step=state.global_step)
        self.results.append(result)
        if metrics is not None:  # what trainer.evaluate() returns
            metrics.update({self.prefix + k: v for k, v in metrics_of(result.record).items()
                            if not k.startswith("timings/")})

    def on_evaluate(self, args, state, control, model=None, metrics=None, **kwargs):
        if "evaluate" in self.at:
            self._run(state, model, metrics)

    def on_save(self, args, state, control, model=None, **kwargs):
        if "save" in self.at:
            self._run(state, model)
