"""A finished run in the formats where the field reads results (``vlbench export``; docs/export.md): the
built-in exporters.

* :mod:`.mteb` -- MTEB result files (one JSON per task, MTEB's layout and metric names; conditions as MTEB
  experiments), read by ``mteb``'s own loader;
* :mod:`.modelindex` -- the ``model-index`` block of a Hugging Face model card and the Hub's ``.eval_results``
  file, built with ``huggingface_hub``'s own classes;
* :mod:`.hub` -- ``--push-to-hub REPO``: a pull request on the model repository, never a direct commit;
* :mod:`.builtin` -- the two formats' registrations in :data:`vlbench.registry.exporters` (lazy targets, as a
  third party's entry points in the group ``vlbench.exporters``); the protocol an exporter follows is
  :mod:`vlbench.plugins.exporter` (a foundation module, so :mod:`vlbench.testing` can check exporters);
* :mod:`.cli` -- the command: the format is looked up in the registry, a run of a kind it does not export refused.

The run is read through :mod:`vlbench.runread` (and its typed record, :class:`vlbench.results.RunRecord`).
"""

from __future__ import annotations
