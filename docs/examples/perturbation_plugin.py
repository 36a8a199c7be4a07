"""Worked example of a vlbench perturbation plug-in: every colour word becomes another colour.

``apply`` returns the perturbed caption, or None where the perturbation does not apply (no colour
word); ``rng`` is seeded by (seed, perturbation name, caption id), so outputs are reproducible and do
not depend on the other captions. In a package, declare

    [project.entry-points."vlbench.perturbations"]
    swap-colour = "mypkg.perturbations:SwapColour"
"""

from vlbench import BasePerturbation

COLOURS = ("red", "green", "blue", "yellow")


class SwapColour(BasePerturbation):
    name = "swap-colour"
    family = "lexical"
    version = "1"  # bump whenever the outputs change: it is part of the cache key and of the results

    def apply(self, text, *, rng, tokens=None):
        words = text.split(" ")
        new = [rng.choice([c for c in COLOURS if c != w]) if w in COLOURS else w for w in words]
        return " ".join(new) if new != words else None
