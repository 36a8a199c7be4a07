"""MTEB's own retrieval scores (its evaluator: pytrec_eval plus its MRR) of a similarity matrix, read from the
installed ``mteb`` package: the names and values the MTEB export is checked against."""

from __future__ import annotations

import numpy as np


def mteb_retrieval_scores(sim: np.ndarray, caption_to_image, direction: str, k_values=(1, 5, 10)) -> dict:
    """MTEB's score dict (``ndcg_at_10``, ``hit_rate_at_1``, ...) of one direction of an (images x captions)
    similarity matrix, each caption relevant to its image only."""
    from mteb._evaluators.retrieval_metrics import calculate_retrieval_scores, make_score_dict

    n_img, n_cap = sim.shape
    if direction == "i2t":
        results = {f"q{i}": {f"d{j}": float(sim[i, j]) for j in range(n_cap)} for i in range(n_img)}
        qrels = {f"q{i}": {f"d{j}": 1 for j in range(n_cap) if caption_to_image[j] == i} for i in range(n_img)}
    else:
        results = {f"q{j}": {f"d{i}": float(sim[i, j]) for i in range(n_img)} for j in range(n_cap)}
        qrels = {f"q{j}": {f"d{caption_to_image[j]}": 1} for j in range(n_cap)}
    r = calculate_retrieval_scores(results, qrels, list(k_values))
    return make_score_dict(ndcg=r.ndcg, _map=r.map, recall=r.recall, precision=r.precision, mrr=r.mrr,
                           naucs=r.naucs, naucs_mrr=r.naucs_mrr, hit_rate=r.hit_rate, task_scores={})


def mteb_score_names(k_values=(1, 5, 10)) -> set[str]:
    """Every score name MTEB's retrieval evaluator reports for these cut-offs."""
    sim = np.array([[0.9, 0.1, 0.3, 0.2], [0.2, 0.8, 0.1, 0.7]])
    return set(mteb_retrieval_scores(sim, [0, 1, 0, 1], "i2t", k_values))
