"""The two-stage protocol of a run (``vlbench run --model DUAL --rerank PAIR_SCORER --rerank-k K``): the run's
dual encoder ranks the whole gallery exactly, a pair scorer (vlbench.models.pairs) re-scores each query's top K,
and the final ranking is scored by the suite's own metric code, per condition.

* :mod:`.checks`: the options, checked before any work (light: imported by ``validate``);
* :mod:`.source`: each query's first-stage head, and the final ranking as a similarity source for the metrics;
* :mod:`.pairs`: the pair model's work (images encoded once per condition, each distinct pair once) and the
  pair-score cache;
* :mod:`.stage`: the stage itself, per condition and fold, and results.json ``rerank``.

docs/usage.md ("Two-stage runs") states the rule and the record.
"""
