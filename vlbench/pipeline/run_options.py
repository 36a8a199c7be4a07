"""The options of ``vlbench run``, generated from :class:`~vlbench.pipeline.run_config.RunConfig`.

:data:`RUN_OPTIONS` gives each RunConfig field its command-line flag, help and kind; the argparse
options (:func:`add_run_options`, one argparse group per RunConfig option group, so ``--help`` shows
them grouped), the ``--config run.toml`` keys (vlbench/config.py reads the keys off these argparse
options) and the Python API (``RunConfig(**fields)``) therefore share one definition: the field's
default is the option's default, its group is the group that declares the field, and the choice lists
come from run_config.py. tests/unit/pipeline/test_run_options.py checks that every field has exactly one option and
the other way round.

The parsed arguments also say which options were given (on the command line or in the ``--config``
file), whatever their value: :func:`given_fields`. A choice task refuses the retrieval options by it.

Flags that are not run settings (``--config``, ``--json``, and ``--task``/``--images-dir``/``--perturb-options``,
which send the arguments to a choice task, vlbench/tasks/cli.py) are listed in :data:`CLI_ONLY`. ``--dataset`` is
the one field the command line may leave out: a choice task names its own data; a retrieval run without
it stops in ``vlbench run`` with exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass

from ..errors import OptionError
from ..perturbations.cli import parse_params
from ..registry import Names
from . import run_config

#: options of ``vlbench run`` that are not RunConfig fields: how the CLI reads and prints, not what runs
CLI_ONLY = ("--config", "--json", "--task", "--images-dir", "--perturb-options")
#: fields without a default that the command line does not require (checked later, see above)
_OPTIONAL_ON_CLI = ("dataset",)


@dataclass(frozen=True)
class Option:
    field: str  # the RunConfig field
    flag: str  # the long option; its config-file key is the flag without "--" (or with "_")
    help: str = ""
    kind: str = "str"  # str | int | float | flag (on/off) | ints (comma-separated) | names (comma-separated) | params
    choices: tuple | Names | None = None
    metavar: str | None = None
    listed: bool = False  # a str option whose value is a comma-separated list (kinds ints and names always are)

    @property
    def is_list(self) -> bool:
        """The option takes one comma-separated list: given twice on the command line it is refused."""
        return self.listed or self.kind in ("ints", "names")


def _ints(s: str) -> tuple:
    try:
        return tuple(int(x) for x in s.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes comma-separated integers, got {s!r}") from None


def _names(s: str) -> tuple:
    return tuple(x.strip() for x in s.split(",") if x.strip())


RUN_OPTIONS = (
    Option("model", "--model", "NAME[:CHECKPOINT], e.g. clip, clip:/path/to/folder, "
                               "openclip:ViT-B-32/laion2b_s34b_b79k"),
    Option("dataset", "--dataset", "flickr30k, flickr30k-fg, coco, coco-fg, coco-1k, flickr30k-de, "
                                   "flickr30k-multi30k-{en,de,fr,cs}, custom:<manifest.jsonl> or "
                                   "hf:ORG/NAME[?split=S&image=COL&caption=COL,COL] (vlbench ls datasets); "
                                   "with --task sugarcrepe: sugarcrepe[:SUBSETS]; with --task sugarcrepe++: "
                                   "sugarcrepe++[:SUBSETS]"),
    Option("perturb", "--perturb", "'all', a family (typos, lexical, distraction, word-order) or comma-separated "
                                   "perturbation names", listed=True),
    Option("perturb_images", "--perturb-images", "ImageNet-C corruptions as conditions: names or families with "
                                                 "severities, e.g. gaussian_noise:3,motion_blur:1-5,all:3 "
                                                 "(vlbench ls image-perturbations)", metavar="SPEC", listed=True),
    Option("mce_reference", "--mce-reference", "run folder of a reference model's --perturb-images run: mCE relative "
                                               "to it (ImageNet-C)", metavar="RUN"),
    Option("corrupt_at", "--corrupt-at", "corrupt images at the model's input geometry (shorter side to its input "
                                         "size, centre crop: the ImageNet-C definition; default) or at their "
                                         "original size", choices=run_config.CORRUPT_AT),
    Option("corrupt_backend", "--corrupt-backend", "the corruptions' code: reference (imagecorruptions' NumPy/SciPy/"
                                                   "OpenCV code; default) or torch (the same definitions in torch, "
                                                   "agreement in docs/image_perturbations.md; with --pixels device "
                                                   "run on the device, batched); recorded per condition, never "
                                                   "cached or tabled with the other",
           choices=run_config.CORRUPT_BACKENDS),
    Option("shortcuts", "--shortcuts", "synthetic-shortcut probes as conditions: matched, mismatched, caption-only, "
                                       "image-only, bits=N (comma-separated; docs/shortcuts.md)", metavar="PROBES",
           listed=True),
    Option("token_budget", "--token-budget", "caption budgets in the model's own tokens, each a condition "
                                             "budget:B (captions cut to B tokens, end token kept), e.g. 16,32,64,77",
           kind="ints", metavar="B[,B...]"),
    Option("sentence_budget", "--sentence-budget", "caption budgets in sentences, each a condition sentences:K "
                                                   "(the first K sentences), e.g. 1,2,3", kind="ints",
           metavar="K[,K...]"),
    Option("digits", "--digits", "digit images of the shortcut probes (auto: MNIST when available, else "
                                 "scikit-learn's)", choices=run_config.DIGIT_SOURCES),
    Option("distractors", "--distractors", "extra gallery candidates (never queries), comma-separated sources: "
                                           "images:FOLDER, dataset:NAME (its images), captions:FILE (one per line); "
                                           "adds the condition distractors:<label> with its false rate "
                                           "(docs/distractors.md)", metavar="SPEC", listed=True),
    Option("perturb_params", "--param", "perturbation parameter, e.g. synonym-noun.choice=random (repeatable)",
           kind="params", metavar="NAME.KEY=VALUE"),
    Option("out", "--out", "run folder (default runs/<run id>); a finished run there is refused unless --resume or "
                           "--overwrite says what to do with it"),
    Option("dataset_name", "--dataset-name", "name of the dataset in results and leaderboards (default: its own, "
                                             "custom:<file name>); name two different custom datasets differently "
                                             "to put them on one leaderboard"),
    Option("model_name", "--model-name", "label of the model in leaderboards (default: the --model spec)"),
    Option("data_dir", "--data-dir", "folder with caption files and images/ (default: $VLBENCH_DATA_DIR or "
                                     "~/.cache/vlbench/data)"),
    Option("gallery", "--gallery", "candidate images for t2i: the test set, the FG release's enlarged pool, or every "
                                   "image in the image folder",
           choices=run_config.GALLERIES),
    Option("allow_partial_gallery", "--allow-partial-gallery", "accept a --gallery folder image folder smaller than "
           "the dataset's full folder (Flickr30k 31,783, COCO val2014 40,504 images); the size joins the protocol "
           "label, e.g. <protocol>[gallery=5000]", kind="flag"),
    Option("extra_positives", "--extra-positives", "extended positives for coco: eccv / cxc follow ECCV Caption's "
                                                   "official protocol (annotated queries, eccv_* / cxc_* metrics); "
                                                   "eccv-all / cxc-union add them to the "
                                                   "original positives of every query",
           choices=run_config.EXTRA_POSITIVES),
    Option("limit", "--limit", "a smoke test: only the first N images with their captions (the run id says "
                               "-limitN; leaderboards leave such runs out unless asked)", kind="int", metavar="N"),
    Option("device", "--device", "cuda, cuda:1, mps or cpu (default: best available)"),
    Option("precision", "--precision", "weights and activations (default fp32)", choices=run_config.PRECISIONS),
    Option("batch_size", "--batch-size", "image batch size (texts use max(this, 256))", kind="int"),
    Option("text_batch_size", "--text-batch-size", "caption batch size (default max(--batch-size, 256))", kind="int"),
    Option("num_workers", "--num-workers", "image decoding worker processes", kind="int"),
    Option("threads", "--threads", "CPU threads of the model's forward (default: the cores this process may use, "
                                   "alone and in a sweep alike; a CPU forward's numbers depend on it)", kind="int"),
    Option("pixels", "--pixels", "what makes the image pixels: reference (default: the model's own processor on "
                                 "PIL-decoded images, in the workers) or device (JPEGs decoded, resized and "
                                 "normalised on --device in batches; a few grey levels from the reference, a model "
                                 "identity of its own: docs/performance.md)", choices=run_config.PIXEL_PATHS),
    Option("seed", "--seed", "perturbation and bootstrap seed", kind="int"),
    Option("k", "--k", "Recall@k cut-offs (default 1,5,10)", kind="ints"),
    Option("p", "--dcg-p", "DCG_CM rank cut-off p (default 10)", kind="int"),
    Option("relevance", "--relevance", "relevance of non-positives in DCG_CM: 'self' (the evaluated similarity) or a "
                                       "fixed relevance model spec, e.g. clip:openai/clip-vit-base-patch32",
           metavar="MODEL"),
    Option("protocol", "--protocol", "evaluation protocol: a named preset of the options below (vlbench ls "
                                     "protocols; docs/studies.md); each of them overrides its single setting",
           choices=run_config.PROTOCOL_NAMES),
    Option("i2t_recall", "--i2t-recall", "i2t Recall@k: hit (any relevant caption in the top k) or fraction "
                                         "(hits / min(#relevant, k))", choices=run_config.I2T_RECALLS),
    Option("perturb_side", "--perturb-side", "where perturbed captions go: both directions, or t2i queries only",
           choices=run_config.PERTURB_SIDES),
    Option("truncate_chars", "--truncate-chars", "cut captions to N characters before encoding (0: no cut)",
           kind="int", metavar="N"),
    Option("perturb_variant", "--perturb-variant", "perturbation implementations: standard, or a registered "
                                                   "variant (vlbench ls perturbation-variants)",
           choices=run_config.PERTURB_VARIANTS),
    Option("cache_dir", "--cache-dir", "cache root of every store: embeddings, perturbed captions, model identities, "
                                       "MiniLM vectors, ... (default $VLBENCH_CACHE_DIR or ~/.cache/vlbench; see "
                                       "vlbench cache ls)"),
    Option("no_cache", "--no-cache", "neither read nor write the embedding cache", kind="flag"),
    Option("restart", "--restart", "ignore cached embeddings from earlier runs and re-encode", kind="flag"),
    Option("trust_remote_code", "--trust-remote-code",
           "allow checkpoints that run their own code (transformers trust_remote_code)", kind="flag"),
    Option("revision", "--revision", "hub revision (branch, tag or commit) of the checkpoint"),
    Option("n_boot", "--bootstrap", "bootstrap resamples for RSUM-change CIs", kind="int"),
    Option("graded", "--graded-relevance", "also report t2i nDCG with graded caption-caption labels: rouge-l and/or "
                                           "minilm (comma-separated; see docs/graded_relevance.md for the cost)",
           kind="names", metavar="KINDS"),
    Option("score_block", "--score-block", "score the gallery in blocks of at most ROWSxCOLS similarities (e.g. "
                                           "4096x65536: 1 GiB), whatever its size; exactly the numbers of the "
                                           "one-piece pass (docs/metrics.md)", metavar="ROWSxCOLS"),
    Option("mia_score", "--mia-score", "per-query score grouping the model-input analysis",
           choices=run_config.MIA_SCORES),
    Option("validity", "--validity", "semantic drift of perturbed captions (all-MiniLM-L6-v2): a fixed-seed sample "
                                     "of --validity-sample applied captions per perturbation (default), all of them, "
                                     "or none", choices=run_config.VALIDITY_MODES),
    Option("validity_sample", "--validity-sample", "at most this many applied captions in the drift sample, fewer "
                                                   "once the mean drift is known to --validity-precision "
                                                   "(default 2000)", kind="int"),
    Option("validity_precision", "--validity-precision", "the drift sample grows (from 500) until the 95-percent "
                                                         "interval of the mean drift is within +- this (default 0.005; "
                                                         "0: "
                                                         "always --validity-sample captions)", kind="float"),
    Option("quiet", "--quiet", "no progress bars or table", kind="flag"),
    Option("resume", "--resume", "--out already holds a finished run: print it as it is instead of refusing the "
                                 "folder (same model and dataset only); an unfinished run there continues either way",
           kind="flag"),
    Option("overwrite", "--overwrite", "--out already holds a finished run: replace it (its results.json, "
                                       "table.md and per-query file are deleted first)", kind="flag"),
    Option("report_to", "--report-to", "trackers that receive the finished run: wandb, mlflow, tensorboard, trackio "
           "(comma-separated; each its extra, e.g. pip install 'vlbench[wandb]'; docs/training.md)", kind="names"),
)


def _default(name: str):
    """The field's default; dataclasses.MISSING for a field the caller must give (a required option)."""
    f = next(f for f in dataclasses.fields(run_config.RunConfig) if f.name == name)
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING


#: the namespace attribute where the recording actions note each given option's field
_GIVEN = "run_options_given"


#: the namespace attribute where the comma-list options note each value given on the command line, in order
_LISTS = "run_options_lists"


def _recording(base: type, listed: bool = False) -> type:
    """``base`` that also notes its field as given (a value equal to the default still counts); ``listed``:
    a comma-list option, whose every value is noted too, so a repeat can be refused (:func:`check_repeats`)."""

    class Recording(base):
        def __call__(self, parser, namespace, values, option_string=None):
            setattr(namespace, _GIVEN, getattr(namespace, _GIVEN, frozenset()) | {self.dest})
            if listed:
                seen = dict(getattr(namespace, _LISTS, {}))
                seen[self.dest] = [*seen.get(self.dest, []), values]
                setattr(namespace, _LISTS, seen)
            super().__call__(parser, namespace, values, option_string)

    Recording.__name__ = f"Given{'List' if listed else ''}{base.__name__}"
    return Recording


_STORE, _FLAG, _APPEND = (_recording(a) for a in (argparse._StoreAction, argparse._StoreTrueAction,
                                                   argparse._AppendAction))
_STORE_LIST = _recording(argparse._StoreAction, listed=True)


class ConfigFileAction(argparse._StoreAction):
    """``--config FILE``: vlbench/config.py places the file's option tokens before this option and the command
    line's own after it, so a comma-list option in both is the command line overriding the file (the file's
    value is forgotten here), not a repeat."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, _LISTS, {})
        super().__call__(parser, namespace, values, option_string)


#: why a comma-list option given twice is refused (``vlbench run --help`` says it)
REPEAT_RULE = ("A comma-list option (" + "{flags}" + ") takes one list: --perturb typos,lexical. Given twice on "
               "the command line it is refused, neither merged nor overridden: a repeat usually comes from a base "
               "command with an override appended, and merging would run more than the override asks, overriding "
               "would drop what the base asks, both silently. A value in a --config file is overridden by the "
               "command line's.")


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """One argparse option per RunConfig field (dest = the field name, default = the field's default),
    in one argparse group per option group (run_config.GROUPS)."""
    groups = {name: parser.add_argument_group(f"{name} options", cls.__doc__) for name, _, cls in run_config.GROUPS}
    for o in RUN_OPTIONS:
        group = groups[run_config.group_of(o.field)]
        kw: dict = {"dest": o.field, "help": o.help}
        default = _default(o.field)
        if o.kind == "flag":
            group.add_argument(o.flag, action=_FLAG, **kw)
            continue
        if o.kind == "params":
            group.add_argument(o.flag, action=_APPEND, default=[], metavar=o.metavar, **kw)
            continue
        if default is dataclasses.MISSING:
            kw["required"] = o.field not in _OPTIONAL_ON_CLI
            kw["default"] = None
        else:
            kw["default"] = default
        kw["type"] = {"int": int, "float": float, "ints": _ints, "names": _names}.get(o.kind, str)
        if o.choices:
            kw["choices"] = o.choices
        if o.metavar:
            kw["metavar"] = o.metavar
        group.add_argument(o.flag, action=_STORE_LIST if o.is_list else _STORE, **kw)


def given_fields(args: argparse.Namespace) -> frozenset:
    """The RunConfig fields whose option was given (command line or --config file), default value or not."""
    return getattr(args, _GIVEN, frozenset())


def flag_of(field: str) -> str:
    """The command-line flag of a RunConfig field (for messages)."""
    return next(o.flag for o in RUN_OPTIONS if o.field == field)


def list_flags() -> str:
    """The comma-list options' flags, for the help text."""
    return ", ".join(o.flag for o in RUN_OPTIONS if o.is_list)


def _text(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def check_repeats(args: argparse.Namespace) -> None:
    """OptionError for a comma-list option given more than once on the command line (:data:`REPEAT_RULE`),
    naming the values and the one list that holds them all."""
    for dest, values in getattr(args, _LISTS, {}).items():
        if len(values) > 1:
            shown = [_text(v) for v in values]
            joined = ",".join(dict.fromkeys(x.strip() for v in shown for x in v.split(",") if x.strip()))
            given = ", then ".join(map(repr, shown))
            raise OptionError(dest, f"{{opt}} was given {len(values)} times ({given}); it takes one comma-separated "
                                    "list, and a repeat is refused rather than merged or overridden",
                              "give it once, with every value you want in one list", example=joined)


def config_from_args(args: argparse.Namespace) -> run_config.RunConfig:
    """The RunConfig of parsed ``vlbench run`` arguments (a repeated comma-list option refused)."""
    check_repeats(args)
    values = {o.field: getattr(args, o.field) for o in RUN_OPTIONS}
    if values["perturb_params"]:
        values["perturb_params"] = parse_params(values["perturb_params"])
    else:
        values["perturb_params"] = {}
    return run_config.RunConfig(**values)
