"""Per-image cost of each ImageNet-C corruption (severity 3) at 224x224, at a 500x375 photo size, and for the
500x375 photo at the model's input geometry (CorruptedLoader(input_size=224): resize + centre crop, then corrupt).

Usage: PYTHONPATH=. python scripts/benchmarks/bench_image_perturb.py [--repeats 5] [--severity 3]
Prints a Markdown table of median milliseconds per image (one CPU core, single process).
"""

import argparse
import statistics
import time

import numpy as np
from PIL import Image

from vlbench.imageperturb import NAMES, CorruptedLoader, corrupt


def photo(width, height, seed=0):
    rs = np.random.RandomState(seed)
    yy, xx = np.mgrid[0:height, 0:width]
    base = np.stack([xx / width, yy / height, (xx + yy) / (width + height)], -1) * 200
    return Image.fromarray(np.uint8(np.clip(base + rs.normal(0, 20, base.shape), 0, 255)))


def median_ms(image, name, severity, repeats, input_size=None):
    loader = CorruptedLoader(name, severity, 0, input_size=input_size)
    times = []
    for i in range(repeats):
        t = time.perf_counter()
        loader(image, i)
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--severity", type=int, default=3)
    args = ap.parse_args()
    sizes = [(224, 224), (500, 375), (500, 375)]
    at = [None, None, 224]
    images = [photo(*s) for s in sizes]
    corrupt(images[0], "frost", 1, 0, "warm-up")  # loads the reference module and frost images
    print(f"| corruption (severity {args.severity}) | " + " | ".join(
        f"{w}x{h}" + ("" if a is None else f" at input {a}") + " ms" for (w, h), a in zip(sizes, at)) + " |")
    print("|---|" + "---:|" * len(sizes))
    totals = [0.0] * len(sizes)
    for name in NAMES:
        row = [median_ms(img, name, args.severity, args.repeats, a) for img, a in zip(images, at)]
        totals = [a + b for a, b in zip(totals, row)]
        print(f"| {name} | " + " | ".join(f"{v:.1f}" for v in row) + " |")
    print("| **all 15 (sum)** | " + " | ".join(f"{v:.0f}" for v in totals) + " |")


if __name__ == "__main__":
    main()
