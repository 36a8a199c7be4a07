"""Leaderboard tables of the multilingual retrieval sets (xm3600, xtd10): :mod:`.table`."""
