"""Parts of the caption perturbations kept apart from the main modules: the language check (:mod:`.languages`)
and NLTK 3.8.1's word tokenizer for the authors-compatible variant (:mod:`.tokenizer381`)."""
