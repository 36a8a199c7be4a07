"""``vlbench explain RUN``: the failure browser, a static HTML page of the queries a run's conditions flip.

For a fixed-seed sample of the queries that flip at k=1 under each condition (hit -> miss first, then
miss -> hit; vlbench.explain.flips), the page shows: for a caption perturbation (t2i) the original and the
perturbed caption with the edit marked word by word, the ground-truth image, the top-5 images before and after
and the ground truth's ranks; for an image corruption (i2t) the clean and the corrupted query image (rendered
again with vlbench.imageperturb at the run's seed, severity and geometry) and the top-5 captions before and
after. Inputs: the run folder (results.json, retrieved.npz) and the run's dataset, read by vlbench.runread.
docs/explain.md has the reading guide.

What lives here: :mod:`.browser` (:func:`explain`: the page from a run folder), :mod:`.source` (the run's
dataset, conditions and retrieved lists), :mod:`.flips` (which queries flip), :mod:`.render` (HTML) and
:mod:`.cli`. To show a new kind of condition: teach ``source.condition_kind`` its kind and ``flips`` its
section. This file holds no logic: it re-exports the public names.
"""

from .browser import DEFAULT_NAME, explain

__all__ = ["explain", "DEFAULT_NAME"]
