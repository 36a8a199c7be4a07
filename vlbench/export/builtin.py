"""The built-in exporters, registered as a third party's are: a lazy ``"module:attr"`` target each; a third party
declares ``[project.entry-points."vlbench.exporters"]``."""

from __future__ import annotations

from ..registry import exporters

exporters.register("mteb", "vlbench.export.mteb:EXPORTER",
                   description="MTEB result files, read by mteb's own loader (conditions as MTEB experiments)")
exporters.register("model-index", "vlbench.export.modelindex:EXPORTER",
                   description="a Hugging Face model card's model-index and the Hub's .eval_results file")
