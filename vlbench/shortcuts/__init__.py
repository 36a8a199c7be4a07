"""Synthetic-shortcut probes (the SVL framework of Bleeker et al., TMLR 2024, used at test time).

A shortcut is a number written as 6 zero-padded digits: on an image, as handwritten digit images evenly
spaced across the top (one cell of width W/6 per digit); on a caption, appended as space-separated digits.
A probe says which number each image and each caption carries (see :func:`probe_plan`).

What lives here: the digit bank and rendering (:mod:`.digits`), probe plans (:mod:`.plans`), the run's
shortcut conditions (:mod:`.conditions`) and the standalone probe evaluation (:mod:`.probe`). To add a
probe: name it in ``digits.PROBES`` and give its numbers in ``plans.probe_plan``. This file holds no logic:
it re-exports the public names.
"""

from .digits import (
                     DIGIT_SOURCES,
                     N_DIGITS,
                     PROBES,
                     DigitBank,
                     caption,
                     cell_boxes,
                     digits_of,
                     exemplar_index,
                     load_digit_bank,
                     render,
)
from .plans import ProbePlan, apply_plan_to_captions, derangement, parse_probe, probe_plan

__all__ = ["DIGIT_SOURCES", "N_DIGITS", "PROBES", "DigitBank", "caption", "cell_boxes", "digits_of", "exemplar_index",
           "load_digit_bank", "render", "ProbePlan", "apply_plan_to_captions", "derangement", "parse_probe",
           "probe_plan"]
