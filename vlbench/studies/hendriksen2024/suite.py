"""The chapter's grid as a sweep suite (``vlbench sweep --suite hendriksen2024``): the 4 models x 4 test sets of
Tables 5.2-5.4, each run under the chapter's protocol with clean + the 13 perturbations (14 conditions), as
``vlbench reproduce hendriksen2024`` runs them (its tables are written by that command from the same run
folders' records)."""

from __future__ import annotations

from vlbench.sweep.suites import Suite

#: the reproduction's model and dataset keys (reproduce/run.py MODELS, DATASETS; kept light here: no pipeline import)
MODELS = {"align": "align", "altclip": "altclip", "clip": "clip", "groupvit": "groupvit"}
DATASETS = {"coco": "coco", "coco-fg": "coco-fg", "flickr30k": "flickr30k", "flickr30k-fg": "flickr30k-fg"}

SUITE = Suite("hendriksen2024", "the chapter's Tables 5.2-5.4: 4 models x 4 datasets x 14 conditions",
              {"options": {"n-boot": 1000},
               "models": dict(MODELS), "datasets": dict(DATASETS),
               "conditions": {"chapter": {"protocol": "hendriksen2024", "perturb": "all"}}})
