"""The caption-folder options the scripts share: where the real test-set captions are (``../shared``, or
$VLBENCH_SHARED_CAPTIONS), declared once."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED_CAPTIONS = os.environ.get("VLBENCH_SHARED_CAPTIONS", str(ROOT.parent / "shared" / "data" / "captions"))


def caption_parser(doc: str, *, dataset: bool = True) -> argparse.ArgumentParser:
    """An ArgumentParser described by the script's docstring, with --data-dir (and --dataset, default coco)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    if dataset:
        ap.add_argument("--dataset", default="coco")
    ap.add_argument("--data-dir", default=SHARED_CAPTIONS)
    return ap
