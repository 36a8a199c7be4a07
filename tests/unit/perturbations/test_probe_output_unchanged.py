"""The meaning-changing probes made now are byte-for-byte the probes made before the speed work (issue 46's
speed must-show: "WITHOUT changing a single probe"). The excerpt is 80 MS-COCO and 40 Flickr30k test images
(every 62nd / 25th image of the released test sets, all their captions); the digests were written by the code
before any optimisation (commit c0049ec), per caption set and probe: the number of probes made and the sha256
of every (probe, caption) line. The full-size check over all 25,000 COCO and 5,000 Flickr30k captions is
``scripts/benchmarks/probe_golden.py`` (BENCHMARKS.md)."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict

import pytest
from support.data import TESTS

from vlbench.perturbations.probes import PROBES, make_probes

EXCERPT = TESTS / "fixtures" / "probe_golden_excerpt.jsonl"
DIGESTS = TESTS / "fixtures" / "probe_golden_digests.json"


def _probe_lines(name: str, ps) -> list[str]:
    """One JSON line per caption, as scripts/benchmarks/probe_golden.py writes them."""
    return [json.dumps({"probe": name, "id": cid, "text": t, "applicable": a, "verified": v, "meta": m},
                       sort_keys=True, ensure_ascii=False)
            for cid, t, a, v, m in zip(ps.caption_ids, ps.texts, ps.applicable, ps.verified, ps.meta)]


@pytest.mark.slow  # tags 600 real captions and makes all 11 probes of them (a few seconds)
def test_probes_byte_identical_to_the_pre_optimisation_output():
    sets: dict = defaultdict(lambda: ([], [], []))
    for line in EXCERPT.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        caps, ids, imgs = sets[row["set"]]
        for j, c in enumerate(row["captions"]):
            caps.append(c)
            ids.append(f"{row['image']}#{j}")
            imgs.append(row["image"])
    expected = json.loads(DIGESTS.read_text(encoding="utf-8"))
    got = {}
    for set_name, (caps, ids, imgs) in sets.items():
        for name, ps in make_probes(caps, ids, imgs, tuple(PROBES), seed=0).items():
            lines = _probe_lines(name, ps)
            got[f"{set_name}/{name}"] = {"applicable": sum(ps.applicable),
                                         "sha256": hashlib.sha256("\n".join(lines).encode()).hexdigest()}
    assert sorted(got) == sorted(expected) and len(got) == 2 * len(PROBES)
    assert all(v["applicable"] > 0 for v in got.values())  # every probe is exercised on the excerpt
    changed = [k for k in expected if got[k] != expected[k]]
    assert not changed, f"probes changed: {changed}"
