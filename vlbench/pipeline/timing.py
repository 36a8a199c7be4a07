"""Where a run's time went: one clock per run, stages that add up to the wall time, and the hardware.

Every second of a run belongs to exactly one stage: the clock always has a current stage, a nested stage
pauses the one around it (exclusive attribution), and time outside any named stage goes to ``other``. So
the stages sum to the wall time by construction, and ``other`` shows what no stage names (the
torchrun gather). Building and writing the record, the run's id and output folder are ``writing``; binding image
conditions to the model is ``image_decode_preprocess``; the encoding of gallery distractors is booked in the
encoding stages like the gallery's own. Image conditions (corruptions, shortcut probes) have a stage of their own
in a run that makes their images: ``image_corrupt_cpu``, the main process's wait for the DataLoader workers that
decode, transform and preprocess them on the CPU, or ``image_corrupt_device``, the time in the corruptions run on
the model's device (``--pixels device --corrupt-backend torch``: no CPU stage then); items: the images made.

Encoding is split after the fact from the encode statistics (:class:`vlbench.encoding.encode.EncodeStats`),
which time the model's forward passes and the model load where they happen: what remains of an image
encoding step is ``image_decode_preprocess``, the time the main process spent getting images ready:
waiting for DataLoader batches (decode and preprocess run in the worker processes while the model runs, so
only the wait is seen; with ``--num-workers 0`` it is the decode itself), file header checks and cache
look-ups. Worker CPU time is not summed: it overlaps the forward passes and is not wall time.

A run started by the command line (``vlbench run``) starts its clock when the process started (the kernel's
record of it): the interpreter's start-up, vlbench's imports and the reading of the options before ``run()`` are the
stage ``startup``, so a warm run's stages add up to what its user waited, not to the part inside ``run()``.
``vlbench.cli.main(argv)`` called in a Python process starts it at that call (reading the options and importing the
pipeline, about a second, are ``startup``); ``vlbench.run()`` at its own call. The clock's report is taken last, once
the record is built and every other run file written: only serialising and writing results.json and table.md
(milliseconds) come after it.

The clock of the run in progress is held in a context variable, so the pipeline's steps add stages
without passing it around; outside a run, stages are timed into a clock nobody reads.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import platform
import sys
import time
from collections.abc import Callable

from ..encoding.encode import default_workers
from ..models.lazy import default_threads  # the run's thread rule, one definition

#: the stages results.json names, in the order a run meets them (others are allowed)
STAGES = ("startup", "startup_model_load", "perturbation", "image_decode_preprocess", "image_corrupt_cpu",
          "image_corrupt_device", "image_forward",
          "text_preprocess", "text_forward", "relevance_encode", "validity", "scoring", "bootstrap", "flips",
          "writing", "other")


#: functions called with the new stage's name whenever a clock enters another stage (a sweep worker's progress
#: report); a listener must be quick and must not raise
STAGE_LISTENERS: list[Callable[[str], None]] = []


class Clock:
    """Exclusive stage times: ``seconds[stage]``; ``items[stage]`` where a stage counts what it did."""

    def __init__(self, first: str = "other"):
        self.t0 = self._mark = time.perf_counter()
        self.current = first
        self.seconds: dict[str, float] = {}
        self.items: dict[str, int] = {}

    def _switch(self, stage: str) -> str:
        now = time.perf_counter()
        self.seconds[self.current] = self.seconds.get(self.current, 0.0) + now - self._mark
        self._mark, previous, self.current = now, self.current, stage
        if stage != previous:
            for listener in STAGE_LISTENERS:  # a sweep's progress display: the stage each run is in
                listener(stage)
        return previous

    def enter(self, stage: str) -> None:
        """From now on the time goes to ``stage`` (sequential code, no nesting)."""
        self._switch(stage)

    @contextlib.contextmanager
    def stage(self, name: str, items: int | None = None):
        previous = self._switch(name)
        try:
            yield self
        finally:
            self._switch(previous)
            if items is not None:
                self.count(name, items)

    def count(self, stage: str, items: int) -> None:
        self.items[stage] = self.items.get(stage, 0) + int(items)

    def move(self, source: str, target: str, seconds: float) -> None:
        """Re-attribute ``seconds`` measured inside ``source`` to ``target`` (never more than ``source`` has)."""
        seconds = max(0.0, min(seconds, self.seconds.get(source, 0.0)))
        self.seconds[source] = self.seconds.get(source, 0.0) - seconds
        self.seconds[target] = self.seconds.get(target, 0.0) + seconds

    def elapsed(self) -> float:
        """Seconds since the clock started."""
        return time.perf_counter() - self.t0

    def report(self) -> dict:
        """``{"wall_seconds", "stages": {stage: {"seconds", "items", "items_per_s"}}}`` (results.json
        ``timings``); the current stage is closed first, so the stages sum to the wall time."""
        self._switch(self.current)
        wall = time.perf_counter() - self.t0
        order = [s for s in STAGES if s in self.seconds] + sorted(set(self.seconds) - set(STAGES))
        stages = {}
        for s in order:
            sec, n = self.seconds[s], self.items.get(s)
            stages[s] = {"seconds": round(sec, 6), "items": n,
                         "items_per_s": round(n / sec, 3) if n is not None and sec > 0 else None}
        return {"wall_seconds": round(wall, 6), "stages": stages}


_CURRENT: contextvars.ContextVar[Clock | None] = contextvars.ContextVar("vlbench_run_clock", default=None)

#: when the process running ``vlbench run`` started (a perf_counter value), set by the command line for the
#: run it starts and taken by that run's clock (:func:`start`); None in a Python session (the run starts the clock)
_PROCESS_START: list[float] = []


def process_started() -> float | None:
    """The perf_counter value at which this process started (the interpreter's own start-up included), read
    from the kernel's record of it (Linux /proc, 10 ms resolution); None where that is not available."""
    try:
        with open("/proc/self/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):  # no /proc, or no CLOCK_BOOTTIME (not Linux)
        return None
    return time.perf_counter() - age if 0.0 <= age < 7 * 86400 else None


def note_process_start(t: float) -> None:
    """The next run's clock starts at ``t`` (a perf_counter value; the command line: when the process started),
    the time before the run itself booked as ``startup``: interpreter, imports, reading the options."""
    _PROCESS_START[:] = [t]


def start(first: str = "startup_model_load") -> Clock:
    """A new clock for the run starting now (replacing any earlier run's), its time going to ``first``; when the
    command line noted its process's start (:func:`note_process_start`, taken once), the clock starts there and
    the time until now is ``startup``, so the stages add up to what the user waited."""
    since = _PROCESS_START.pop() if _PROCESS_START else None
    if since is None or since > time.perf_counter():
        clock = Clock(first)
    else:
        clock = Clock("startup")
        clock.t0 = clock._mark = since
        clock.enter(first)
    _CURRENT.set(clock)
    return clock


def current() -> Clock:
    """The running run's clock (a throwaway clock outside a run)."""
    clock = _CURRENT.get()
    return clock if clock is not None else Clock()


def stage(name: str, items: int | None = None):
    return current().stage(name, items)


def enter(name: str) -> None:
    current().enter(name)


def timed(name: str, fn: Callable, items: Callable | None = None):
    """``fn()`` timed as stage ``name``; ``items(result)``: how many items it handled."""
    with stage(name):
        out = fn()
    if items is not None:
        current().count(name, items(out))
    return out


def caption_count(perturbed: dict) -> int:
    """Items of the perturbation stage: the captions made, over all caption perturbations."""
    return sum(len(ps.texts) for ps in perturbed.values())


def resamples(cfg) -> Callable:
    """Items of the bootstrap stage: resamples drawn (n_boot per condition other than clean)."""
    return lambda out: cfg.n_boot * len({i.condition for i in out[1]})


_SPLITS = (("image_forward_seconds", "image_forward", "images_encoded"),
           ("text_forward_seconds", "text_forward", "texts_encoded"),
           ("model_load_seconds", "startup_model_load", None))
#: image conditions (field of seconds, stage, field of items): a stage only in a run that has such images
_CONDITION_SPLITS = (("condition_wait_seconds", "image_corrupt_cpu", "images_transformed_workers"),
                     ("corrupt_device_seconds", "image_corrupt_device", "images_corrupted_device"))


def encoding(name: str, stats, fn: Callable):
    """``fn()`` (an encoding step adding to ``stats``) timed as stage ``name``, whose forward passes and model
    load (measured in ``stats`` where they happen) then move to their own stages; ``name`` keeps the rest.
    Items: the images / texts the model encoded (cache hits are not counted)."""
    before = {f: getattr(stats, f, 0) for f, _, _ in _SPLITS} | {c: getattr(stats, c, 0) for _, _, c in _SPLITS if c}
    before["images_decoded"] = getattr(stats, "images_decoded", 0)
    before |= {f: getattr(stats, f, 0) for split in _CONDITION_SPLITS for f in (split[0], split[2])}
    out = timed(name, fn)
    clock = current()
    for field, target, counter in _SPLITS:
        clock.move(name, target, getattr(stats, field, 0.0) - before[field])
        if counter:
            n = getattr(stats, counter, 0) - before[counter]
            clock.count(target, n)
    for field, target, counter in _CONDITION_SPLITS:
        n = getattr(stats, counter, 0) - before[counter]
        if n:
            clock.move(name, target, getattr(stats, field, 0.0) - before[field])
            clock.count(target, n)
    if name == "image_decode_preprocess":  # its items: the image files decoded (not the pixel cache's)
        clock.count(name, getattr(stats, "images_decoded", 0) - before["images_decoded"])
    return out


def hardware(device, precision: str, batch_size: int, num_workers: int | None, threads: int | None = None) -> dict:
    """results.json ``hardware``: the device the model ran on, GPU name, CPU count, torch and CUDA versions
    (read only if torch is already imported: a fully cached run does not import it for this), the
    precision, batch size, DataLoader workers (the default: min(4, CPUs - 1)) and the CPU threads of the
    model's forward (``--threads``; the default: the cores this process may use)."""
    torch = sys.modules.get("torch")
    gpu = cuda = version = None
    if torch is not None:
        version = getattr(torch, "__version__", None)
        cuda = getattr(getattr(torch, "version", None), "cuda", None)
        with contextlib.suppress(Exception):
            if str(device).startswith("cuda") and torch.cuda.is_available():
                gpu = torch.cuda.get_device_name(torch.device(str(device)))

    workers = num_workers if num_workers is not None else default_workers()
    return {"device": str(device), "gpu_name": gpu, "cpu_count": os.cpu_count() or 1, "torch": version,
            "cuda": cuda, "precision": str(precision), "batch_size": int(batch_size), "num_workers": int(workers),
            "threads": int(threads) if threads else default_threads(), "platform": platform.platform()}


def execution(adapter, pixels: str, stats) -> dict:
    """How the model was fed and run, beside ``hardware``: the pixel path (--pixels), how many images came from
    the pixel cache, the attention implementation of the loaded model (None: not loaded, or the adapter does not
    say) and torch's float32 matmul precision ("highest": true fp32; "high": TF32 on GPUs that have it)."""
    torch = sys.modules.get("torch")
    attention = getattr(adapter, "attention_implementation", None)
    matmul = None
    with contextlib.suppress(Exception):
        matmul = torch.get_float32_matmul_precision() if torch is not None else None
    return {"pixels": pixels, "pixels_from_cache": int(getattr(stats, "pixels_cached", 0)),
            "attention": attention() if callable(attention) else None, "float32_matmul": matmul}


def run_fields(cfg, enc) -> dict:
    """``timings`` and ``hardware`` of results.json for the run in progress (the clock's report so far)."""
    m = cfg.model_opts
    device = enc.adapter.device  # a warm run's model, never loaded: the device it resolves to (models/lazy.py)
    return {"timings": current().report(),
            "hardware": hardware(device, m.precision, m.batch_size, m.num_workers, m.threads) | execution(
                enc.adapter, m.pixels, enc.stats)}
