"""Named suites: grids of runs kept as data, ``vlbench sweep --suite NAME`` (``vlbench ls suites``).

A suite is a plan document (the TOML tables of a plan file, as a dict) with default models and datasets; the
command line replaces them (``--model NAME=SPEC``, ``--dataset NAME=SPEC``: given ones replace the suite's whole
table). Suites register in the registry ``vlbench.registry.suites`` like the other parts; a study registers its
own from its registration function (vlbench.studies).

Built in:

* ``lite``: a few minutes on a laptop CPU: the first 100 images of each dataset (``--limit 100``) with their
  captions, clean plus one condition per family in one run: typos (char-swap), word order (shuffle-all-words),
  lexical (synonym-noun), distraction (distraction-true), and the four ImageNet-C families at severity 3
  (gaussian_noise, motion_blur, fog, jpeg_compression); 200 bootstrap resamples; validity off. Default: CLIP
  ViT-B/32 on Flickr30k.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from .. import registry
from ..errors import VlbenchError
from .plan import Plan, parse_plan


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    doc: dict  # the plan's tables; [models] and [datasets] are the defaults
    notes: tuple[str, ...] = field(default=())

    def plan(self, models: dict | None = None, datasets: dict | None = None) -> Plan:
        doc = copy.deepcopy(self.doc)
        if models:
            doc["models"] = dict(models)
        if datasets:
            doc["datasets"] = dict(datasets)
        return parse_plan(doc, f"suite {self.name}")


LITE_TEXT = ("char-swap", "shuffle-all-words", "synonym-noun", "distraction-true")
LITE_IMAGES = ("gaussian_noise:3", "motion_blur:3", "fog:3", "jpeg_compression:3")

LITE = Suite("lite", "a few minutes on a laptop CPU: 100 images, one condition per caption and image family",
             {"options": {"limit": 100, "n-boot": 200, "validity": "off"},
              "models": {"clip": "clip"}, "datasets": {"flickr30k": "flickr30k"},
              "conditions": {"lite": {"perturb": list(LITE_TEXT), "perturb-images": ",".join(LITE_IMAGES)}}})

registry.suites.register("lite", LITE, description=LITE.description)


def suite(name: str) -> Suite:
    found = registry.suites.get(name)
    if not isinstance(found, Suite):
        raise VlbenchError(f"suite {name!r} ({registry.suites.entry(name).source}) is not a Suite record",
                           "fix the package that registers it (a vlbench.sweep.suites.Suite)")
    return found
