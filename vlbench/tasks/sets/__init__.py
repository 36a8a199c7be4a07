"""The choice sets, one module each: each builds a ``ChoiceTask`` declaration (how its items load, its scoring
shape from vlbench.tasks.shapes, size, licence, citation, metric names, paper scores, blind ceiling, published
scores, stores) and registers it. The task registry finds every module of this folder (nothing lists them), so a
new set is one new file here and its tests (docs/tasks.md, "Adding a set")."""
