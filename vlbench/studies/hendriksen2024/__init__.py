"""The hendriksen2024 study: Hendriksen et al., "Assessing Brittleness of Image-Text Retrieval Benchmarks from
Vision-Language Models Perspective" (chapter 5 of the thesis; the method vlbench grew from).

* :mod:`.protocol` -- the chapter authors' protocol as a preset (``--protocol hendriksen2024``): every image
  of the image folder as t2i gallery, i2t recall as the fraction of relevant captions in the top k, a fixed
  relevance model for DCG, perturbed captions as t2i queries only, captions cut at 330 characters, and the
  authors-compatible perturbations; and the paper's reading of the granularity features (profile ``paper``);
* :mod:`.compat` and :mod:`.tokenizer381` -- the authors-compatible perturbations (``--perturb-variant
  hendriksen2024``) and NLTK 3.8.1's word tokenizer they use;
* :mod:`.reproduce` -- ``vlbench reproduce hendriksen2024``: the runs behind Tables 5.2-5.4 and the
  published values beside the measured ones;
* :mod:`.registration` -- what it adds to the registries (entry point ``vlbench.studies``).
"""
