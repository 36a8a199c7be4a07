"""A study as a plan: a grid of runs (models x datasets x conditions x seeds) expanded to runs with deterministic
ids and folders under one study folder, executed by an executor (local processes, Slurm through submitit, Ray).

Every executor runs the same unit of work, :func:`vlbench.sweep.worker.run_task`, on a :class:`~.worker.Task`;
see :mod:`vlbench.sweep.executors` for the contract.
"""
