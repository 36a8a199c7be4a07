"""Published rows and task entries of a pair scorer are matched with its score options: a row measured with BLIP's
or BLIP-2's logit + ITC score (``?score=itm-logit+itc``) never applies to a run scored by p(match), and a preset
(``?protocol=blip2``) applies as its options written out."""

from __future__ import annotations

import dataclasses

from vlbench.published import table as T
from vlbench.published.table import published_rows

BLIP = "blip:Salesforce/blip-itm-base-coco"


def test_two_stage_rows_match_only_runs_with_the_same_pair_score_options():
    row = T.PublishedRow("r", "m", (BLIP,), "coco", {}, {},
                         rerank={"model": "blip-itm?score=itm-logit+itc&max_text_tokens=35", "k": 256})
    assert T.same_stages(row, "blip-itm:Salesforce/blip-itm-base-coco?max_text_tokens=35&score=itm-logit+itc", 256)
    assert not T.same_stages(row, "blip-itm", 256)  # p(match): another protocol
    assert not T.same_stages(row, "blip-itm?score=itm-logit+itc", 256)  # another caption cut
    preset = dataclasses.replace(row, rerank={"model": "blip2-itm?protocol=blip2", "k": 128})
    assert T.same_stages(preset, "blip2-itm?score=itm-logit+itc&max_text_tokens=32", 128)
    assert not T.same_stages(preset, "blip2-itm", 128)


def test_the_shipped_blip2_row_names_lavis_score():
    (row,) = [r for r in published_rows() if r.id == "blip2-paper-vitg-coco-itm-rerank"]
    assert T.pair_options(row.rerank["model"]) == T.pair_options("blip2-itm?protocol=blip2")


def test_spec_key_keeps_pair_options_and_drops_dual_encoder_options():
    assert T.spec_key("blip-itm?protocol=blip") == T.spec_key(
        "blip-itm:Salesforce/blip-itm-base-coco?score=itm-logit+itc&max_text_tokens=35&itm_token=[ENC]")
    assert T.spec_key("blip-itm") != T.spec_key("blip-itm?score=itm-logit")
    siglip = "siglip2:google/siglip2-base-patch16-224"
    assert T.spec_key(siglip + "?lowercase=0") == siglip
