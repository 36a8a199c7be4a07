"""``--task sugarcrepe``: SugarCrepe's seven hard-negative sets (Hsieh et al. 2023), one registered record.

Files: ``data/<subset>.json`` of github.com/RAIVNLab/sugar-crepe at a pinned commit (downloaded when online);
images: COCO val2017 (``--images-dir``). Each item is an image with its caption and one hard negative.
"""

from __future__ import annotations

from pathlib import Path

from ...datasets import download
from ...datasets.download import DownloadError
from ...errors import DataError, VlbenchError
from ...util import paths
from ...util.io import atomic_write_bytes, sha256_bytes, sha256_file, sha256_json
from ..blind import SUGARCREPE_TEST_IMAGES
from ..registry import ChoiceTask, ItemSets, register_task
from ..sources import SUGARCREPE_SUBSETS, coco_val2017_dir, sugarcrepe_items

SUGARCREPE_COMMIT = "0047054b243992f0fad63d6f64f7544862daf846"
SUGARCREPE_RAW = f"https://raw.githubusercontent.com/RAIVNLab/sugar-crepe/{SUGARCREPE_COMMIT}/data"
#: sha256 of each file at the pinned commit: a download is checked against it before it is written
SUGARCREPE_SHA256 = {
    "add_att": "012d88d729693d193760e6f3393b06a1cf874380a9db0062e937201199fe044d",
    "add_obj": "1b9d76b93139a937b8dc1ada92a4f05ecc821bb3c291d752428bafadd4bb0682",
    "replace_att": "9fe55fd4c0a9ad1f85d486d9f6d0215b41f867eb025026e7f7b5ce44352545ee",
    "replace_obj": "9d299600639947e9d15281a9ded1382b376cf4ea088a8d08a1314bfe76e81898",
    "replace_rel": "356bcc2fc4c6aed3f4d9fd50acc58489bb1fe70c28791f9368d4cbf9ea39cdc9",
    "swap_att": "7a7ce04e5c4c80412b48c6f0c1347fb1a2f5d54c0be6aa429b64d390e442f8d0",
    "swap_obj": "073cdb8e253d053614e80710834d9773b09dbc1dd0a412f6f9492262caa1dcad",
}


def sugarcrepe_root(data_dir=None, subsets=SUGARCREPE_SUBSETS) -> Path:
    """The folder with the JSON files of SugarCrepe's ``subsets`` (default all seven; only those asked for are
    needed): <data-dir>/sugarcrepe (or <data-dir> itself); online, missing ones are downloaded there from the
    pinned commit."""

    base = Path(data_dir).expanduser() if data_dir else paths.default_data_dir()
    for cand in (base / "sugarcrepe", base):
        if all((cand / f"{s}.json").is_file() for s in subsets):
            return cand
    target = base / "sugarcrepe"
    missing = [f"{s}.json" for s in subsets if not (target / f"{s}.json").is_file()]
    where = (f"put {', '.join(missing)} from the data/ folder of github.com/RAIVNLab/sugar-crepe (commit "
             f"{SUGARCREPE_COMMIT[:10]}, {SUGARCREPE_RAW}/<name>.json) in {target}, or pass --data-dir naming the "
             "folder that holds them")
    if paths.offline():
        raise DataError(f"the SugarCrepe file{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                        f"{'are' if len(missing) > 1 else 'is'} not in {target}", where)

    for name in missing:
        try:
            body = download.http_get(f"{SUGARCREPE_RAW}/{name}")
        except DownloadError as exc:
            raise DataError(f"could not download SugarCrepe's {name}: {exc.reason}", where) from None
        digest, pinned = sha256_bytes(body), SUGARCREPE_SHA256[name.removesuffix(".json")]
        if digest != pinned:
            raise DataError(f"the downloaded SugarCrepe {name} has sha256 {digest[:16]}..., pinned {pinned[:16]}... "
                            "(altered in transit, or not the pinned commit's file); nothing was written",
                            f"try again later, or {where}")
        atomic_write_bytes(target / name, body)
    return target


def parse_sugarcrepe_spec(spec: str | None) -> list[str]:
    """``sugarcrepe`` (all seven) or ``sugarcrepe:swap_obj,swap_att``."""
    name, _, rest = (spec or "sugarcrepe").partition(":")
    if name != "sugarcrepe":
        raise VlbenchError(f"--task sugarcrepe reads --dataset sugarcrepe[:SUBSET,...], not {spec!r}",
                           f"e.g. --dataset sugarcrepe or --dataset sugarcrepe:{SUGARCREPE_SUBSETS[0]}")
    subsets = [s.strip() for s in rest.split(",") if s.strip()] or list(SUGARCREPE_SUBSETS)
    bad = [s for s in subsets if s not in SUGARCREPE_SUBSETS]
    if bad:
        raise VlbenchError(f"unknown SugarCrepe subset {bad[0]!r}", f"use some of {', '.join(SUGARCREPE_SUBSETS)}")
    return list(dict.fromkeys(subsets))


def sugarcrepe_sets(cfg, note=None) -> ItemSets:
    """The item sets of ``--task sugarcrepe``: one per subset named by ``--dataset``."""
    subsets = parse_sugarcrepe_spec(cfg.dataset)
    root = sugarcrepe_root(cfg.data_dir, subsets)
    images = Path(cfg.images_dir).expanduser() if cfg.images_dir else coco_val2017_dir()
    sets, notes = {}, {}
    for s in subsets:
        sets[f"task:sugarcrepe:{s}"] = sugarcrepe_items(root, s, images_dir=images)
        notes[f"task:sugarcrepe:{s}"] = {"items": len(sets[f"task:sugarcrepe:{s}"])}
    keys = dict.fromkeys(it.image for items in sets.values() for it in items)
    files = {s: sha256_file(root / f"{s}.json") for s in subsets}
    name = (cfg.dataset_name or "sugarcrepe").strip()
    desc = {"name": name, "hash": sha256_json({"files": files}), "n_images": len(keys),
            "n_items": sum(len(v) for v in sets.values()), "subsets": subsets,
            "source": {"annotations": str(root), "sha256": files, "images": str(images),
                       "repository": f"github.com/RAIVNLab/sugar-crepe@{SUGARCREPE_COMMIT}"}}
    return ItemSets(sets, {k: images / k for k in keys}, desc, notes)


#: the paper's accuracy (OpenAI ViT-B-32) and item count of each set, as measured (PUBLISHED)
PAPER_ACCURACY = {"add_att": (68.79, 692), "add_obj": (77.21, 2062), "replace_att": (80.08, 788),
                  "replace_obj": (90.92, 1652), "replace_rel": (69.2, 1406), "swap_att": (63.96, 666),
                  "swap_obj": (61.38, 246)}
#: sha256 of the 246-item swap_obj.json of commit 6e45274, the file the paper's swap_obj value was measured on
SWAP_OBJ_246_SHA256 = "15624c2460f5c10e8720fca0f1c27ddd61998b3b8b10998ff007cd84ea8fd31a"


def _paper_sets() -> dict:
    sets: dict[str, dict] = {f"task:sugarcrepe:{k}": {"scores": {"accuracy": acc}, "n_items": n,
                                                      "sha256": [SUGARCREPE_SHA256[k]]}
                             for k, (acc, n) in PAPER_ACCURACY.items()}
    sets["task:sugarcrepe:swap_obj"]["sha256"].insert(0, SWAP_OBJ_246_SHA256)
    sets["task:sugarcrepe:swap_obj"]["version_note"] = (
        "measured on the 246-item file of commit 6e45274 (2023-06-23); commit 546eb51 (2023-11-18) removed one item "
        "with an incorrect caption, so vlbench's pinned file (commit 0047054) has 245: one item moves the accuracy "
        "by at most 0.41 points")
    return sets


#: the published scores of this set (vlbench.published.task_scores; docs/published.md): one entry per source
PUBLISHED = (
    {'id': 'sugarcrepe-paper-openai-vit-b-32',
     'model': "OpenAI CLIP ViT-B-32 (open_clip ViT-B-32, pretrained='openai')",
     'specs': ['openclip:ViT-B-32/openai', 'clip:openai/clip-vit-base-patch32', 'st:clip-ViT-B-32'],
     'sets': _paper_sets(),
     'source': {'kind': 'paper',
                'citation': 'Hsieh, Zhang, Ma, Kembhavi and Krishna, SugarCrepe: Fixing Hackable Benchmarks for '
                            'Vision-Language Compositionality, NeurIPS 2023 Datasets and Benchmarks '
                            '(arXiv:2306.14610)',
                'table': 'the benchmark table of 17 pretrained CLIP models, row OpenAI ViT-B-32 (accuracy = the '
                         "paper's Recall@1 of the positive caption, percent)",
                'url': f'https://github.com/RAIVNLab/sugar-crepe/blob/{SUGARCREPE_COMMIT}/assets/sugarcrepe_eval.png',
                'read_in': 'RAIVNLab/sugar-crepe, assets/sugarcrepe_eval.png at commit '
                           "0047054b243992f0fad63d6f64f7544862daf846 (the table the authors' README shows, added "
                           '2023-06-26 in commit e1c8214)',
                'consistency': "each value times its set's item count is a whole number of items (e.g. swap_obj "
                               '61.38 % = 151 of 246)'},
     'protocol': {'set_version': 'data/*.json of RAIVNLab/sugar-crepe as of commit 6e45274 (2023-06-23): the files '
                                 'vlbench pins, except swap_obj (246 items then, 245 at the pinned commit)',
                  'implementation': "open_clip create_model_and_transforms('ViT-B-32', pretrained='openai') (the "
                                    "authors' main_eval.py)",
                  'preprocessing': "open_clip's transform for the OpenAI weights: resize the shorter side to 224 "
                                   '(bicubic), center crop 224, RGB, CLIP mean/std',
                  'precision': 'fp32 (main_eval.py runs the fp32 model without autocast)',
                  'lowercase': "tokenizer's own (CLIP's BPE lower-cases)",
                  'prompt': 'none (the caption as written)',
                  'tie_rule': 'strict: correct only when the positive caption scores above the negative (a tie is '
                              'a miss)'},
     'match': {'adapter': 'vlbench.openclip',
               'preprocessing_adapter': 'vlbench.openclip',
               'precision': 'fp32',
               'strict': True},
     'note': 'the swap_obj value is of the 246-item file; vlbench downloads the 245-item file of its pinned commit '
             '(the check names this as a difference of set version)'},
)


SUGARCREPE = register_task(ChoiceTask(
    "sugarcrepe", "SugarCrepe's seven hard-negative sets (Hsieh et al. 2023), 2-way, COCO val2017 images; "
                  "--dataset sugarcrepe[:SUBSET,...]", sugarcrepe_sets, images_dir=True,
    blind_excluded_images=SUGARCREPE_TEST_IMAGES, published=PUBLISHED,
    size="7,511 items in 7 sets (2 options each): add_att 692, add_obj 2,062, replace_att 788, replace_obj 1,652, "
         "replace_rel 1,406, swap_att 666, swap_obj 245 (the pinned commit's files)",
    licence="MIT (the repository's LICENSE); images: COCO 2017 val (Flickr terms), captions CC BY 4.0",
    citation="Hsieh, Zhang, Ma, Kembhavi and Krishna, SugarCrepe: Fixing Hackable Benchmarks for Vision-Language "
             "Compositionality, NeurIPS 2023 Datasets and Benchmarks",
    scores=(("accuracy", "accuracy"),)))
