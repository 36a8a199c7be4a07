"""The run pipeline: plan -> encode -> score -> record (``vlbench.run``, ``vlbench run``).

What lives here: the run's options and config (:mod:`.run_options`, :mod:`.run_config`), the checks before
any work (:mod:`.preflight`), the steps (:mod:`.runner`), scoring (:mod:`.scoring`, :mod:`.distractors`),
image and shortcut conditions (:mod:`.variants`), what a run writes besides results.json
(:mod:`.report`, :mod:`vlbench.encoding.index`; the file names: vlbench.runfolder), reruns into a finished
folder (:mod:`.rerun`) and timings (:mod:`.timing`).

A new kind of condition or metric is added where it lives (vlbench.conditions, vlbench.metrics), not as a
new step here. This file holds no logic.
"""
