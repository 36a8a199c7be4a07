"""The table of options: every option of a run, declared once, in :data:`OPTIONS`.

One row per option says its name (the :class:`~vlbench.RunConfig` field, the keyword of :func:`vlbench.run`,
:class:`~vlbench.training.Evaluator` and the plan key with dashes), its command-line flag (whose spelling without
``--`` is its key in a ``--config`` file and in a sweep plan; ``batch_size`` is read the same), its kind, help,
default, the name of its list of choices, its group in ``vlbench run --help``, whether it changes a number the run
reports (:data:`CHANGES`) and where it applies (:data:`WHERE`). What is made from it:

* the options of ``vlbench run`` (vlbench/pipeline/run_options.py adds one argparse option per row) and the
  ``--config`` keys (vlbench/config.py reads the keys off those options);
* the keys a sweep plan accepts (vlbench/sweep/plan.py) and what a plan refuses (the rows without ``plan``);
* what ``--resume`` and a sweep compare before they treat a finished run as this one (vlbench/pipeline/rerun.py:
  every option whose ``numbers`` is not ``no``), and each sweep run's id;
* the option lists of docs/usage.md (:func:`markdown_table`, checked by tests/docs/test_option_table.py).

``RunConfig``'s groups (vlbench/pipeline/run_config.py) declare the same fields with their types, and the
Evaluator its keywords; tests/unit/pipeline/test_option_table.py checks both against this table (names,
defaults, groups), as it checks every flag, config key and plan key. Adding an option is one row here, plus its
field in RunConfig's group (and the code that uses it).

The choice lists live beside the code that checks them (``choices`` names the constant of
vlbench/pipeline/run_config.py), so this module imports nothing of vlbench: every layer can read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import install_extra

#: ``numbers``: the option changes a number the run reports (compared by --resume and a sweep, hashed in a run id)
YES = "yes"
#: the option changes no number (where files go, labels, speed on the CPU): never compared
NO = "no"
#: on an accelerator (cuda, mps) the option changes numbers (batched kernels differ with the batch's shape), on
#: the CPU it does not; compared when the run's device is not the CPU
ACCELERATOR = "on accelerators"
#: the numbers follow the data's content, not the option's text: compared through the dataset's content hash
CONTENT = "by content"
NUMBERS = (YES, NO, ACCELERATOR, CONTENT)

#: where an option applies: ``cli`` a flag of ``vlbench run``; ``config`` a key of its ``--config`` file; ``plan`` a
#: key of a sweep plan's option tables; ``api`` a keyword of :func:`vlbench.run` (a RunConfig field); ``evaluator`` a
#: keyword of :class:`vlbench.training.Evaluator`
WHERE = ("cli", "config", "plan", "api", "evaluator")
EVERYWHERE = frozenset(WHERE)
#: the options a sweep sets itself or that name the run's folder, and the ones that only shape the command line
NOT_PLAN = EVERYWHERE - {"plan"}
RUN = frozenset({"cli", "config", "api"})  # the model, resume, overwrite: neither a plan nor the Evaluator sets them
COMMAND = frozenset({"cli", "config"})
REQUIRED: Any = "<required>"  # the default of an option that has none (``model``, ``dataset``)


@dataclass(frozen=True)
class Option:
    """One row of the table (see the module's doc)."""

    field: str  # the RunConfig field / keyword name
    flag: str  # the long option; the config and plan key is the flag without "--" (or with "_")
    help: str = ""
    kind: str = "str"  # str | int | float | flag (on/off) | ints (comma-separated) | names (comma-separated) | params
    choices: Any = None  # the name of its choice list in vlbench/pipeline/run_config.py; run_options.py fills it in
    metavar: str | None = None
    listed: bool = False  # a str option whose value is a comma-separated list (kinds ints and names always are)
    group: str = "kind"  # its group in vlbench run --help (a RunConfig option group; "kind": the kind of run)
    default: Any = None
    numbers: str = YES  # does it change a number the run reports (NUMBERS)
    where: frozenset = EVERYWHERE  # where it applies (WHERE)

    @property
    def is_list(self) -> bool:
        """The option takes one comma-separated list: given twice on the command line it is refused."""
        return self.listed or self.kind in ("ints", "names")

    @property
    def key(self) -> str:
        """Its key in a ``--config`` file and a plan (the flag without ``--``)."""
        return self.flag[2:]


OPTIONS = (
    Option('model', '--model',
           'NAME[:CHECKPOINT], e.g. clip, clip:/path/to/folder, openclip:ViT-B-32/laion2b_s34b_b79k',
           default=REQUIRED, group='model', where=RUN),
    Option('dataset', '--dataset',
           'flickr30k, flickr30k-fg, coco, coco-fg, coco-1k, flickr30k-de, flickr30k-multi30k-{en,de,fr,cs}, '
           'custom:<manifest.jsonl> or hf:ORG/NAME[?split=S&image=COL&caption=COL,COL] (vlbench ls datasets); '
           'with --task sugarcrepe: sugarcrepe[:SUBSETS]; with --task sugarcrepe++: sugarcrepe++[:SUBSETS]',
           default=REQUIRED, group='data', numbers=CONTENT, where=NOT_PLAN),
    Option('perturb', '--perturb',
           "'all', a family (typos, lexical, distraction, word-order) or comma-separated perturbation names",
           listed=True, group='conditions', default=None),
    Option('probes', '--probes',
           "meaning-changing probes as conditions, scored apart (kind sensitivity): 'sensitivity' (all), a family "
           "(negation, half-truth) or probe names (docs/perturbations.md)",
           listed=True, group='conditions', default=None),
    Option('perturb_images', '--perturb-images',
           'ImageNet-C corruptions as conditions: names or families with severities, e.g. '
           'gaussian_noise:3,motion_blur:1-5,all:3 (vlbench ls image-perturbations)',
           metavar='SPEC', listed=True, group='conditions', default=None),
    Option('mce_reference', '--mce-reference',
           "run folder of a reference model's --perturb-images run: mCE relative to it (ImageNet-C)",
           metavar='RUN', group='conditions', default=None),
    Option('corrupt_at', '--corrupt-at',
           "corrupt images at the model's input geometry (shorter side to its input size, centre crop: the "
           'ImageNet-C definition; default) or at their original size',
           choices='CORRUPT_AT', group='conditions', default='input'),
    Option('corrupt_backend', '--corrupt-backend',
           "the corruptions' code: reference (imagecorruptions' NumPy/SciPy/OpenCV code; default) or torch (the "
           'same definitions in torch, agreement in docs/image_perturbations.md; with --pixels device run on the'
           ' device, batched); recorded per condition, never cached or tabled with the other',
           choices='CORRUPT_BACKENDS', group='conditions', default='reference'),
    Option('shortcuts', '--shortcuts',
           'synthetic-shortcut probes as conditions: matched, mismatched, caption-only, image-only, bits=N '
           '(comma-separated; docs/shortcuts.md)',
           metavar='PROBES', listed=True, group='conditions', default=None),
    Option('token_budget', '--token-budget',
           "caption budgets in the model's own tokens, each a condition budget:B (captions cut to B tokens, end "
           'token kept), e.g. 16,32,64,77',
           kind='ints', metavar='B[,B...]', group='conditions', default=()),
    Option('sentence_budget', '--sentence-budget',
           'caption budgets in sentences, each a condition sentences:K (the first K sentences), e.g. 1,2,3',
           kind='ints', metavar='K[,K...]', group='conditions', default=()),
    Option('digits', '--digits',
           "digit images of the shortcut probes (auto: MNIST when available, else scikit-learn's)",
           choices='DIGIT_SOURCES', group='conditions', default='auto'),
    Option('distractors', '--distractors',
           'extra gallery candidates (never queries), comma-separated sources: images:FOLDER, dataset:NAME (its '
           'images), captions:FILE (one per line); adds the condition distractors:<label> with its false rate '
           '(docs/distractors.md)',
           metavar='SPEC', listed=True, group='conditions', default=None),
    Option('perturb_params', '--param',
           'perturbation parameter, e.g. synonym-noun.choice=random (repeatable)',
           kind='params', metavar='NAME.KEY=VALUE', group='conditions', default={}),
    Option('out', '--out',
           'run folder (default runs/<run id>); a finished run there is refused unless --resume or --overwrite '
           'says what to do with it',
           group='output', default=None, numbers=NO, where=NOT_PLAN),
    Option('dataset_name', '--dataset-name',
           'name of the dataset in results and leaderboards (default: its own, custom:<file name>); name two '
           'different custom datasets differently to put them on one leaderboard',
           group='data', default=None, numbers=NO),
    Option('model_name', '--model-name',
           'label of the model in leaderboards (default: the --model spec)',
           group='model', default=None, numbers=NO),
    Option('data_dir', '--data-dir',
           'folder with caption files and images/ (default: $VLBENCH_DATA_DIR or ~/.cache/vlbench/data)',
           group='data', default=None, numbers=CONTENT),
    Option('gallery', '--gallery',
           "candidate images for t2i: the test set, the FG release's enlarged pool, or every image in the image "
           'folder',
           choices='GALLERIES', group='data', default=None),
    Option('allow_partial_gallery', '--allow-partial-gallery',
           "accept a --gallery folder image folder smaller than the dataset's full folder (Flickr30k 31,783, "
           'COCO val2014 40,504 images); the size joins the protocol label, e.g. <protocol>[gallery=5000]',
           kind='flag', group='data', default=False, numbers=NO),
    Option('extra_positives', '--extra-positives',
           "extended positives for coco: eccv / cxc follow ECCV Caption's official protocol (annotated queries, "
           'eccv_* / cxc_* metrics); eccv-all / cxc-union add them to the original positives of every query',
           choices='EXTRA_POSITIVES', group='data', default=None),
    Option('limit', '--limit',
           'a smoke test: only the first N images with their captions (the run id says -limitN; leaderboards '
           'leave such runs out unless asked)',
           kind='int', metavar='N', group='data', default=None),
    Option('device', '--device',
           'cuda, cuda:1, mps or cpu (default: best available)',
           group='model', default=None),
    Option('precision', '--precision',
           'weights and activations (default fp32)',
           choices='PRECISIONS', group='model', default='fp32'),
    Option('batch_size', '--batch-size',
           'image batch size (texts use max(this, 256))',
           kind='int', group='model', default=64, numbers=ACCELERATOR),
    Option('text_batch_size', '--text-batch-size',
           'caption batch size (default max(--batch-size, 256))',
           kind='int', group='model', default=None, numbers=ACCELERATOR),
    Option('num_workers', '--num-workers',
           'image decoding worker processes',
           kind='int', group='model', default=None, numbers=NO),
    Option('threads', '--threads',
           "CPU threads of the model's forward (default: the cores this process may use, alone and in a sweep "
           "alike; a CPU forward's numbers depend on it: docs/scale.md)",
           kind='int', group='model', default=None, numbers=YES),
    Option('pixels', '--pixels',
           "what makes the image pixels: reference (default: the model's own processor on PIL-decoded images, in"
           ' the workers) or device (JPEGs decoded, resized and normalised on --device in batches; a few grey '
           'levels from the reference, a model identity of its own: docs/performance.md)',
           choices='PIXEL_PATHS', group='model', default='reference'),
    Option('seed', '--seed', 'perturbation and bootstrap seed', kind='int', group='conditions', default=0,
           where=NOT_PLAN),
    Option('k', '--k',
           'Recall@k cut-offs (default 1,5,10)',
           kind='ints', group='scoring', default=(1, 5, 10)),
    Option('p', '--dcg-p', 'DCG_CM rank cut-off p (default 10)', kind='int', group='scoring', default=10),
    Option('relevance', '--relevance',
           "relevance of non-positives in DCG_CM: 'self' (the evaluated similarity) or a fixed relevance model "
           'spec, e.g. clip:openai/clip-vit-base-patch32',
           metavar='MODEL', group='scoring', default=None),
    Option('protocol', '--protocol',
           'evaluation protocol: a named preset of the options below (vlbench ls protocols; docs/studies.md); '
           'each of them overrides its single setting',
           choices='PROTOCOL_NAMES', group='scoring', default='standard'),
    Option('i2t_recall', '--i2t-recall',
           'i2t Recall@k: hit (any relevant caption in the top k) or fraction (hits / min(#relevant, k))',
           choices='I2T_RECALLS', group='scoring', default=None),
    Option('perturb_side', '--perturb-side',
           'where perturbed captions go: both directions, or t2i queries only',
           choices='PERTURB_SIDES', group='scoring', default=None),
    Option('truncate_chars', '--truncate-chars',
           'cut captions to N characters before encoding (0: no cut)',
           kind='int', metavar='N', group='scoring', default=None),
    Option('perturb_variant', '--perturb-variant',
           'perturbation implementations: standard, or a registered variant (vlbench ls perturbation-variants)',
           choices='PERTURB_VARIANTS', group='scoring', default=None),
    Option('cache_dir', '--cache-dir',
           'cache root of every store: embeddings, perturbed captions, model identities, MiniLM vectors, ... '
           '(default $VLBENCH_CACHE_DIR or ~/.cache/vlbench; see vlbench cache ls)',
           group='output', default=None, numbers=NO),
    Option('no_cache', '--no-cache',
           'neither read nor write the embedding cache',
           kind='flag', group='output', default=False, numbers=NO),
    Option('restart', '--restart',
           'ignore cached embeddings from earlier runs and re-encode',
           kind='flag', group='output', default=False, numbers=NO),
    Option('trust_remote_code', '--trust-remote-code',
           'allow checkpoints that run their own code (transformers trust_remote_code)',
           kind='flag', group='model', default=False, numbers=NO),
    Option('revision', '--revision',
           'hub revision (branch, tag or commit) of the checkpoint',
           group='model', default=None),
    Option('rerank', '--rerank',
           'a pair scorer NAME[:CHECKPOINT][?OPTIONS] (vlbench ls pair-scorers, e.g. blip-itm, '
           '"blip-itm?protocol=blip": docs/models.md) that re-scores each '
           "query's top K of the --model's ranking: a two-stage run (docs/usage.md)",
           metavar='PAIR_SCORER', group='model', default=None),
    Option('rerank_k', '--rerank-k',
           'K: how many first-stage candidates of each query the --rerank pair scorer re-scores (default 16)',
           kind='int', metavar='K', group='model', default=None),
    Option('n_boot', '--bootstrap',
           'bootstrap resamples for RSUM-change CIs',
           kind='int', group='scoring', default=1000),
    Option('graded', '--graded-relevance',
           'also report t2i nDCG with graded caption-caption labels: rouge-l and/or minilm (comma-separated; see'
           ' docs/graded_relevance.md for the cost)',
           kind='names', metavar='KINDS', group='scoring', default=()),
    Option('score_block', '--score-block',
           'score the gallery in blocks of at most ROWSxCOLS similarities (e.g. 4096x65536: 1 GiB), whatever its'
           ' size; exactly the numbers of the one-piece pass (docs/metrics.md)',
           metavar='ROWSxCOLS', group='scoring', default=None, numbers=NO),
    Option('token_memory', '--token-memory',
           "a multi-vector model's (colqwen2, colpali) memory budget in GiB: its token vectors and the MaxSim "
           'scan; a run above it is refused before encoding, with the numbers (default: the memory available)',
           kind='float', metavar='GIB', group='scoring', default=None, numbers=NO),
    Option('mia_score', '--mia-score',
           'per-query score grouping the model-input analysis',
           choices='MIA_SCORES', group='scoring', default='rsum'),
    Option('validity', '--validity',
           'semantic drift of perturbed captions (all-MiniLM-L6-v2): a fixed-seed sample of --validity-sample '
           'applied captions per perturbation (default), all of them, or none',
           choices='VALIDITY_MODES', group='validity', default='sample'),
    Option('validity_sample', '--validity-sample',
           'at most this many applied captions in the drift sample, fewer once the mean drift is known to '
           '--validity-precision (default 2000)',
           kind='int', group='validity', default=2000),
    Option('validity_precision', '--validity-precision',
           'the drift sample grows (from 500) until the 95-percent interval of the mean drift is within +- this '
           '(default 0.005; 0: always --validity-sample captions)',
           kind='float', group='validity', default=0.005),
    Option('quiet', '--quiet', 'no progress bars or table', kind='flag', group='output', default=False, numbers=NO,
           where=NOT_PLAN),
    Option('resume', '--resume',
           '--out already holds a finished run: print it as it is instead of refusing the folder (same model and'
           ' dataset only); an unfinished run there continues either way',
           kind='flag', group='output', default=False, numbers=NO, where=RUN),
    Option('overwrite', '--overwrite',
           '--out already holds a finished run: replace it (its results.json, table.md and per-query file are '
           'deleted first)',
           kind='flag', group='output', default=False, numbers=NO, where=RUN),
    Option('report_to', '--report-to',
           'trackers that receive the finished run: wandb, mlflow, tensorboard, trackio (comma-separated; each '
           f"its extra, e.g. {install_extra('wandb')}; docs/training.md)",
           kind='names', group='output', default=(), numbers=NO),
    # the kind of run and how the command line reads and prints: not RunConfig fields
    Option("config", "--config", "read options from a TOML file whose keys are these long option names "
           "(batch-size = 32); options given here override the file", metavar="FILE.toml", numbers=NO,
           where=frozenset({"cli"})),
    Option("task", "--task", "retrieval (default), or a compositional choice task: order (ARO word order, captions "
           "of --dataset), sugarcrepe, sugarcrepe++, winoground, ... (vlbench ls tasks; docs/tasks.md)",
           where=COMMAND | {"plan"}),
    Option("images_dir", "--images-dir", "--task sugarcrepe / sugarcrepe++: the COCO val2017 image folder (default "
           "$VLBENCH_COCO_VAL2017 or <cache>/coco/val2017)", numbers=CONTENT, where=COMMAND | {"plan"}),
    Option("perturb_options", "--perturb-options", "--task with --perturb: perturb every candidate of an item (all, "
           "the default) or only its right one(s) (correct); recorded (docs/tasks.md)",
           where=COMMAND | {"plan"}),
    Option("json", "--json", "print the results records as JSON", kind="flag", group="output", default=False,
           numbers=NO, where=COMMAND),
    # the Evaluator's own
    Option("project", "--project", "the trackers' project of every call (report_to)", numbers=NO,
           where=frozenset({"evaluator"})),
)


def by_field() -> dict[str, Option]:
    """The rows by field name."""
    return {o.field: o for o in OPTIONS}


def applying(where: str) -> tuple[Option, ...]:
    """The rows that apply at ``where`` (one of :data:`WHERE`), in table order."""
    if where not in WHERE:
        raise ValueError(f"unknown place {where!r}: use one of {', '.join(WHERE)}")
    return tuple(o for o in OPTIONS if where in o.where)


def changing_no_number() -> frozenset[str]:
    """The fields whose value changes no number, or whose numbers are compared through the data's content."""
    return frozenset(o.field for o in OPTIONS if o.numbers in (NO, CONTENT))


def on_accelerators() -> frozenset[str]:
    """The fields that change numbers on an accelerator only (batch sizes)."""
    return frozenset(o.field for o in OPTIONS if o.numbers == ACCELERATOR)


def _shown(value) -> str:
    if value is REQUIRED:
        return "required"
    if value is None or value == () or value == {}:
        return ""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return str(value)


#: the groups in the order the docs list them (vlbench run --help's order; "kind": the kind of run)
GROUP_ORDER = ("model", "data", "conditions", "scoring", "validity", "output", "kind")


def markdown_table(where: str = "cli") -> str:
    """The options that apply at ``where`` as a Markdown table (option, group, default, whether it changes numbers,
    where else it applies, what it does), by group: the option lists of the docs are this text."""
    head = ["| option | group | default | changes numbers | also | what |", "|---|---|---|---|---|---|"]
    lines = []
    for o in sorted(applying(where), key=lambda o: GROUP_ORDER.index(o.group)):
        name = f"`{o.flag}`" if where in ("cli", "config") else f"`{o.field}`"
        also = ", ".join(w for w in WHERE if w in o.where and w != where)
        cells = [name, o.group, _shown(o.default), o.numbers, also, o.help]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(head + lines) + "\n"
