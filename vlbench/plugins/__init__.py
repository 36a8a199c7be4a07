"""Plug-in kinds whose protocol more than one layer needs: :mod:`.exporter` (``vlbench export --format``), read by
:mod:`vlbench.export` (the built-in exporters and the command) and by :mod:`vlbench.testing` (``check_exporter``),
so it sits in the foundation, below both. A kind whose protocol only its own part and the checks read keeps it
there (the trackers: :mod:`vlbench.trackers.protocol`)."""
