"""Published choice sets, one module each (the kernel of vlbench.tasks stays small: registry, items, scoring,
runs); each module builds a ``ChoiceTask`` and registers it, and is listed in
``vlbench.tasks.registry.BUILTIN_MODULES``."""
