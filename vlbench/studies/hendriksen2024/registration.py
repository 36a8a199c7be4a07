"""What the hendriksen2024 study adds to vlbench's registries; called once per process through the entry
point ``vlbench.studies`` (pyproject.toml). Targets are lazy, so registering imports nothing heavy."""

from __future__ import annotations

from vlbench import registry

HERE = "vlbench.studies.hendriksen2024"
SOURCE = "study:hendriksen2024"


def register() -> None:
    registry.protocols.register("hendriksen2024", f"{HERE}.protocol:PROTOCOL", source=SOURCE,
                                description="the chapter authors' protocol (Hendriksen et al.)")
    registry.perturbation_variants.register("hendriksen2024", f"{HERE}.compat:VARIANT_RECORD", source=SOURCE,
                                            description="the authors-compatible implementations of the 13 "
                                                        "perturbations")
    registry.granularity_profiles.register("paper", f"{HERE}.protocol:PAPER_PROFILE", source=SOURCE,
                                           description="the chapter's reading of Table 5.1: NP features per "
                                                       "caption")
    registry.reproductions.register("hendriksen2024", f"{HERE}.reproduce.cli", source=SOURCE,
                                    description="the chapter's Tables 5.2-5.4 (4 models x 4 datasets x 14 "
                                                "conditions)")
    registry.suites.register("hendriksen2024", f"{HERE}.suite:SUITE", source=SOURCE,
                             description="the chapter's grid: 4 models x 4 datasets x 14 conditions (sweep suite)")
