"""Models: what a run evaluates.

What lives here: the adapter interface and model loading (:mod:`.adapter`), the families (:mod:`.families`:
CLIP, OpenCLIP, SigLIP, sentence-transformers and more, in :mod:`.hf`, :mod:`.openclip`, :mod:`.siglip`,
:mod:`.st`), hub resolution (:mod:`.hub`), a model's identity (:mod:`.identity`) and the lazy adapter that
loads weights only when something must be encoded (:mod:`.lazy`).

To add a model: a loader returning an adapter (``preprocess``, ``encode_images``, ``encode_texts``),
registered in ``vlbench.registry.models`` (a plug-in: an entry point in the group ``vlbench.models``,
docs/extending.md). This file holds no logic.
"""
