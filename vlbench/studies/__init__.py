"""Studies: published evaluation protocols reproduced on top of the library, one package each.

A study is what a paper adds to the library: its protocol as a named preset of run options
(``vlbench.pipeline.presets.Protocol``), the registered parts that preset selects where the library lacks
them (a perturbation variant, a granularity profile), its reproduction (``vlbench reproduce NAME``) and its
own output tables. It plugs in only through the public registries (``vlbench.registry``), from a function
named in the entry-point group ``vlbench.studies`` of pyproject.toml; the library (everything outside this
folder) never imports a study. A third party adds a study the same way from its own package.

To add one: a package ``vlbench/studies/<name>/`` with a ``registration.register()`` that registers its
parts by lazy ``"module:attr"`` targets, and one line in pyproject's ``[project.entry-points."vlbench.studies"]``
(docs/studies.md walks through a small one).

* ``hendriksen2024``: Hendriksen et al., "Assessing Brittleness of Image-Text Retrieval Benchmarks from
  Vision-Language Models Perspective": its protocol, authors-compatible perturbations, granularity profile
  and the reproduction of its Tables 5.2-5.4.
"""
