"""Helpers shared by the tests (and by scripts/dev/same_numbers.py and the bench scripts).

``tests/`` is on ``sys.path`` for every test (``pythonpath`` in pyproject.toml), so a test writes
``from support.data import write_manifest`` and a model plug-in target reads ``support.colour_model:load_vec``.
Fixtures live in ``tests/conftest.py`` (the only conftest); plain functions and data live here:

* ``data``: repository paths, the committed caption excerpts, synthetic images and tiny manifests, cache counts;
* ``runs``: a finished small run of the counting plug-in (the ``tiny_run`` fixture's body);
* ``tiny_models``: tiny saved checkpoints of every built-in family, built through the real classes;
* ``colour_model`` / ``shortcut_reader``: deterministic model plug-ins with hand-workable vectors;
* ``synthetic_runs``: valid results.json files written through RunRecord, without a model;
* ``oracles`` / ``protocol_reference``: slow reference implementations written from the definitions;
* ``gold_parse``: spaCy documents with hand-written tags and dependencies;
* ``browser``: the headless Chromium the HTML tests drive (or None);
* ``mirror``: a local Hub-shaped and GitHub-raw-shaped HTTP server (request log, faults) and upstream files in
  their real layouts, for the online-path tests (the ``mirror`` fixture);
* ``cpu_times``: a pytest plug-in (``pytest -p support.cpu_times``) that reports CPU seconds per test and phase.
"""
