"""Which captions make a model brittle: ``vlbench analyze`` joins a run's per-query changes to its captions'
granularity features (join.py), bins and regresses them with intervals that respect shared images (stats.py,
report.py) and plots them (plots.py). docs/analyze.md explains how to read the tables and what they cannot show.
"""
