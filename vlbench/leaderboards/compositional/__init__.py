"""The compositional table of the leaderboard: choice tasks x models, clean and under each family of caption
perturbations and image corruptions (:mod:`.table`). A folder of its own because the leaderboards folder holds as
many modules as the architecture rules allow. This file holds no logic."""
