"""What a leaderboard gives a paper: the ranking view (:mod:`.ranking`), the robustness summary
with chance levels (:mod:`.summary`), every table as LaTeX (:mod:`.latex`) and the figures (:mod:`.plots`, matplotlib
imported only when they are drawn). This file holds no logic."""
