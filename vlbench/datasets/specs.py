"""The built-in datasets as data: one :class:`DatasetSpec` record per dataset.

A record says everything vlbench knows about a dataset: its name, the normalized caption file and its
pinned sha256, which image archive it uses (:data:`IMAGE_SOURCES`), how the caption file is made from
its public sources (a :class:`Recipe`: a step name from :data:`RECIPE_STEPS` and its arguments), and the
options of the dataset (folds, the FG release's enlarged gallery). The loader
(:mod:`vlbench.datasets.builtin`) and the downloader (:mod:`vlbench.datasets.download`) read
these records; neither holds a per-dataset code path. Only the standard library is imported.

Adding a built-in dataset is adding a record here. A third-party dataset is a plug-in instead (see
docs/extending.md): an entry point in the group ``vlbench.datasets`` naming a factory that takes the
keyword arguments ``data_dir``, ``gallery``, ``require_images`` and ``download`` (and ``extra_positives``
when given) and returns a :class:`vlbench.datasets.core.Dataset`, usually through
:func:`vlbench.datasets.core.load_custom` on a manifest it ships or fetches.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

MULTI30K_COMMIT = "a3d2e0d26b56f3846f66a952536ffed4e401d05a"
MULTI30K_RAW = f"https://raw.githubusercontent.com/multi30k/dataset/{MULTI30K_COMMIT}/data"
MULTI30K = f"{MULTI30K_RAW}/task2"
CVLR = ("https://raw.githubusercontent.com/data-ming-and-application/CVLR-RD/"
        "b87a3706d6365134711c50f35e494f801c0c25a3/data/coco_test.json")
FG_REPO = "cwj1412/MSCOCO-Flikcr30K_FG"
FG_COMMIT = "6d98d41a40b5e3e95739b40452d1c5b16f542b16"
FG = f"https://raw.githubusercontent.com/{FG_REPO}/{FG_COMMIT}"

#: the steps a recipe may name (implemented in vlbench.datasets.download)
RECIPE_STEPS = ("multi30k", "karpathy_json", "fg_reorder")


@dataclass(frozen=True)
class Recipe:
    """How a caption file is made: ``step`` (one of :data:`RECIPE_STEPS`) with its arguments.

    * ``multi30k``: ``images`` (URL of the image list), ``captions`` (URL pattern of the gzipped caption
      files, ``{j}`` = 1..``files``) and ``files`` (default 5): one line per image with its captions;
    * ``karpathy_json``: ``url`` of an ALBEF/BLIP-style annotation list (``image``, ``caption``);
    * ``fg_reorder``: ``url`` of an FG annotation (image stem -> captions) and ``order_of``, the dataset
      whose caption file gives the image order.
    """

    step: str
    args: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ImageSource:
    url: str
    sha256: str | None  # None: not pinned upstream (the digest is recorded in the dataset's provenance)
    #: the full image folder the test images are drawn from and its size (``--gallery folder`` ranks all of it)
    folder: str | None = None
    folder_size: int | None = None


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    captions: str  # file name of the normalized caption manifest
    sha256: str  # of that file
    images: str  # key of IMAGE_SOURCES (and folder under <data_dir>/images)
    description: str
    recipe: Recipe
    folds: int | None = None  # evaluate in this many equal folds and report their mean
    fg_pool: str | None = None  # FG release prefix of the enlarged image pool (``--gallery fg-pool``)
    pool_size: int | None = None  # the enlarged gallery size the release describes
    language: str | None = None  # ISO 639-1 code of the captions when not English (recorded in the provenance)
    n_images: int | None = None  # test images (lets a check count the image folder before the captions are there)
    #: the coarse dataset whose images this one re-captions at a finer grain (granularity pairs, FG plots)
    fine_grained_of: str | None = None
    #: the extended-positive kinds (``--extra-positives``) whose ground truth exists for this dataset
    extra_positives: tuple[str, ...] = ()
    licence: str | None = None  # the terms the captions and images come with, as their sources state them
    citation: str | None = None  # what to cite for the captions (and the split)


IMAGE_SOURCES = {
    "flickr30k": ImageSource(
        "https://huggingface.co/datasets/nlphuji/flickr_1k_test_image_text_retrieval/resolve/main/"
        "images_flickr_1k_test.zip", "b0fa9970cc1680a9334818b9da151a62024772b72b961e1454eb6e9866dd7cee",
        folder="flickr30k-images", folder_size=31783),
    "coco": ImageSource(
        "https://huggingface.co/datasets/nlphuji/mscoco_2014_5k_test_image_text_retrieval/resolve/main/"
        "images_mscoco_2014_5k_test.zip", None, folder="MS-COCO val2014", folder_size=40504),
}

_FLICKR = Recipe("multi30k", {"images": f"{MULTI30K}/image_splits/test_2016_images.txt",
                              "captions": MULTI30K + "/raw/test_2016.{j}.en.gz"})
_COCO = Recipe("karpathy_json", {"url": CVLR})
_COCO_SHA = "45e4d927e1b544438122c43012ae876bb651211987a7ddad16a62618b6c708cc"

#: the extended-positive kinds (``--extra-positives``; vlbench.datasets.positives); the ground truth exists for coco
EXTRA_POSITIVE_KINDS = ("cxc", "eccv", "cxc-union", "eccv-all")
# as the sources state them (../shared/data/captions/SOURCES.md keeps the quotes)
_FLICKR_TERMS = ("Flickr30k terms: non-commercial research and educational use; images under the Flickr Terms of "
                 "Use (no licence file in the caption source)")
_FLICKR_CITE = "Young et al., TACL 2014 (captions); Karpathy and Fei-Fei, CVPR 2015 (the 1k test split)"
_COCO_TERMS = "MS-COCO terms of use (no licence file in the caption source)"
_COCO_CITE = "Lin et al., ECCV 2014 (MS-COCO); Karpathy and Fei-Fei, CVPR 2015 (the 5k test split)"
_FG_TERMS = "no licence stated by the FG release; the underlying images' terms apply"
_FG_CITE = "Chen, Yao and Jin, SIGIR 2023 (the fine-grained captions)"
_MULTI30K_CITE = "Elliott et al., 2016 (Multi30K); Young et al., TACL 2014 (Flickr30k)"

SPECS: tuple[DatasetSpec, ...] = (
    DatasetSpec("flickr30k", "flickr30k_test.jsonl",
                "2b6fe218e2c802e7c14d444505d2c543c48c016dbeae32638b564800fbb667ec", "flickr30k",
                "Flickr30k 1k test (Karpathy split), 1,000 images x 5 captions", _FLICKR, licence=_FLICKR_TERMS,
                citation=_FLICKR_CITE),
    DatasetSpec("flickr30k-fg", "flickr30k_fg_test.jsonl",
                "3a9ddca8666b85e24324997cf5dd965d7fa8efabf1d73b5c284e4b1a3de4e44b", "flickr30k",
                "Flickr30k-FG (Chen, Yao & Jin, SIGIR 2023): same images, fine-grained captions",
                Recipe("fg_reorder", {"url": f"{FG}/Annotations/Flickr30K_FG_ann.json", "order_of": "flickr30k"}),
                fg_pool="Flickr30K", pool_size=6867, fine_grained_of="flickr30k", licence=_FG_TERMS,
                citation=_FG_CITE),
    DatasetSpec("coco", "coco5k_test.jsonl", _COCO_SHA, "coco",
                "MS-COCO 5k test (Karpathy split), 5,000 images x 5 captions", _COCO,
                extra_positives=EXTRA_POSITIVE_KINDS, licence=_COCO_TERMS, citation=_COCO_CITE),
    DatasetSpec("coco-fg", "coco5k_fg_test.jsonl",
                "59af2dfbc396456fae0809a6ea8e249371128eb56f1b73a5139ce08662bbfcb1", "coco",
                "MS-COCO-FG (Chen, Yao & Jin, SIGIR 2023): same images, fine-grained captions",
                Recipe("fg_reorder", {"url": f"{FG}/Annotations/MSCOCO_FG_ann.json", "order_of": "coco"}),
                fg_pool="MSCOCO", pool_size=31244, fine_grained_of="coco", licence=_FG_TERMS, citation=_FG_CITE),
    DatasetSpec("coco-1k", "coco5k_test.jsonl", _COCO_SHA, "coco",
                "MS-COCO 1k: the five 1k folds of the 5k test set, reported as their mean", _COCO, folds=5,
                licence=_COCO_TERMS, citation=_COCO_CITE),
)

_LANGS = {"en": "English", "de": "German", "fr": "French", "cs": "Czech"}
_MULTI30K_SHA = {"en": "8473738b6f82e37fb7d1bae6e3a19c68f16a5b2c050280d442cb6713ded16e31",
                 "de": "21f818960f450752b6f9f2464e4e23625ec2a6dc71f5a76ac6ddbce612d345b2",
                 "fr": "88cabd6b2714502448b5df3332a08c9c117030b7004bd9d046efd2695d92dd5b",
                 "cs": "f6682b9b34bcbc1fe8044e8df993cbd7df85f4240bb106649a1acd8f0efb3a56"}

# Multi30K (Elliott et al. 2016, 2017; Barrault et al. 2018) for the Flickr30k 1k test images: task 2 has five
# German descriptions per image written independently of the English ones; task 1 one caption per image, the
# English one translated into German, French and Czech (the four sets ask the same queries).
MULTILINGUAL = (
    DatasetSpec("flickr30k-de", "multi30k/flickr30k_de_test.jsonl",
                "3fb810bcce8cd292cef631741da62b08b1322dbb561428fbcf7de2e5525273b7", "flickr30k",
                "Flickr30k 1k test with 5 independent German descriptions per image (Multi30K task 2)",
                Recipe("multi30k", {"images": f"{MULTI30K}/image_splits/test_2016_images.txt",
                                    "captions": MULTI30K + "/raw/test_2016.{j}.de.gz"}), language="de",
                licence=_FLICKR_TERMS, citation=_MULTI30K_CITE),
) + tuple(
    DatasetSpec(f"flickr30k-multi30k-{lang}", f"multi30k/flickr30k_multi30k_{lang}_test.jsonl", sha, "flickr30k",
                "Flickr30k 1k test, 1 caption per image: " + (
                    "the English caption Multi30K translated" if lang == "en" else f"its {_LANGS[lang]} translation")
                + " (Multi30K task 1)",
                Recipe("multi30k", {"images": f"{MULTI30K_RAW}/task1/image_splits/test_2016_flickr.txt",
                                    "captions": f"{MULTI30K_RAW}/task1/raw/test_2016_flickr.{lang}.gz", "files": 1}),
                language=lang, licence=_FLICKR_TERMS, citation=_MULTI30K_CITE)
    for lang, sha in _MULTI30K_SHA.items())

SPECS = SPECS + MULTILINGUAL
_N_IMAGES = {"flickr30k": 1000, "coco": 5000}  # by image archive: every set on it has all of its test images
SPECS = tuple(replace(s, n_images=_N_IMAGES[s.images]) for s in SPECS)

#: name -> spec
BUILTIN: dict[str, DatasetSpec] = {s.name: s for s in SPECS}
