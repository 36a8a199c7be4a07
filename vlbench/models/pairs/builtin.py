"""The built-in pair scorers, registered lazily (``module:attr``: nothing heavy loads until one is used)."""

from __future__ import annotations

from ... import registry

registry.pair_scorers.register("blip-itm", "vlbench.models.pairs.blip:load_blip_itm",
                               description="BLIP ITM head, p(match) (transformers BlipForImageTextRetrieval); "
                                           "default Salesforce/blip-itm-base-coco")
registry.pair_scorers.register("blip2-itm", "vlbench.models.pairs.blip:load_blip2_itm",
                               description="BLIP-2 ITM head, p(match) (transformers Blip2ForImageTextRetrieval); "
                                           "default Salesforce/blip2-itm-vit-g")
