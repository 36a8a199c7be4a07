"""The shapes of choice sets and the readers they share (the sets themselves are in vlbench/tasks/sets/): the 2x2
pairs of Winoground, ColorSwap and BiVLC (:mod:`.pairs`), the N-captions sets released as JSON files
(:mod:`.captions`), and the Hub's parquet files of a set (:mod:`.hubrows`)."""
