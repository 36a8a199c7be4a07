"""Parts of the caption perturbations kept apart from the main modules: the language check (:mod:`.languages`)."""
