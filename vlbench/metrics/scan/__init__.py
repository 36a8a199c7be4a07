"""The exact scan over the tile grid (metrics/tiles.py): the duplicate search that defines a duplicate's scores
(:mod:`.duplicates`) and the tile-by-tile reducers (:mod:`.reduce`) that every schedule of metrics/sharded.py
runs."""
