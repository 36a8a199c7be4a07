"""Every leaderboard table, in page order: the retrieval tables (tables.py), then the other modalities'
(modalities.py: image corruptions, choice tasks; multilingual/: per-language retrieval), then the long values
table and the provenance."""

from __future__ import annotations

from .compositional.table import compositional_table
from .modalities import choice_table, corruption_table
from .multilingual.table import multilingual_table
from .paper.sensitivity_map import sensitivity_map
from .paper.summary import robustness_summary
from .sections import distractor_table, flips_table, rank_groups
from .store import Selection
from .tables import (
    Labels,
    Table,
    _Ctx,
    clean_retrieval,
    model_input_similarity,
    provenance_table,
    rsum_changes,
    rsum_per_perturbation,
    values_table,
)


def build_tables(selection: Selection, labels: Labels) -> list[Table]:
    ctx = _Ctx(selection, labels)
    return [clean_retrieval(ctx), robustness_summary(ctx), sensitivity_map(ctx), rsum_per_perturbation(ctx, "t2i"),
            rsum_per_perturbation(ctx, "both"),
            model_input_similarity(ctx), rsum_changes(ctx),
            corruption_table(ctx), choice_table(ctx), compositional_table(ctx), multilingual_table(ctx),
            distractor_table(ctx), flips_table(ctx), *rank_groups(ctx),
            values_table(selection, labels), provenance_table(selection, labels)]
