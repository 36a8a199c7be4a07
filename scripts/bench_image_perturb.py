"""Per-image cost of each ImageNet-C corruption (severity 3) at 224x224 and at a 500x375 photo size.

Usage: PYTHONPATH=. python scripts/bench_image_perturb.py [--repeats 5] [--severity 3]
Prints a Markdown table of median milliseconds per image (one CPU core, single process).
"""

import argparse
import statistics
import time

import numpy as np
from PIL import Image

from vlbench.imageperturb import NAMES, corrupt


def photo(width, height, seed=0):
    rs = np.random.RandomState(seed)
    yy, xx = np.mgrid[0:height, 0:width]
    base = np.stack([xx / width, yy / height, (xx + yy) / (width + height)], -1) * 200
    return Image.fromarray(np.uint8(np.clip(base + rs.normal(0, 20, base.shape), 0, 255)))


def median_ms(image, name, severity, repeats):
    times = []
    for i in range(repeats):
        t = time.perf_counter()
        corrupt(image, name, severity, 0, i)
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--severity", type=int, default=3)
    args = ap.parse_args()
    sizes = [(224, 224), (500, 375)]
    images = [photo(*s) for s in sizes]
    corrupt(images[0], "frost", 1, 0, "warm-up")  # loads the reference module and frost images
    print(f"| corruption (severity {args.severity}) | " + " | ".join(f"{w}x{h} ms" for w, h in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    totals = [0.0] * len(sizes)
    for name in NAMES:
        row = [median_ms(img, name, args.severity, args.repeats) for img in images]
        totals = [a + b for a, b in zip(totals, row)]
        print(f"| {name} | " + " | ".join(f"{v:.1f}" for v in row) + " |")
    print("| **all 15 (sum)** | " + " | ".join(f"{v:.0f}" for v in totals) + " |")


if __name__ == "__main__":
    main()
