"""``--pixels device``: JPEGs decoded in batches on the model's device, resized, cropped and normalised there.

The reference path (the default) decodes every image with PIL in DataLoader workers and runs the model's
own processor on it. This path reads the files' bytes in a thread (the next batch while the current one runs),
decodes the JPEGs with ``torchvision.io.decode_jpeg`` on the device (nvJPEG on a GPU; libjpeg on the CPU, which
is how the tests run it), EXIF orientation applied, and hands the uint8 tensors to the adapter's ``to_pixels``
(for the Hugging Face processors: the same torchvision resize and crop, run where the tensors are) and
``from_pixels`` (normalisation). Files the device decoder does not take (PNG and other formats, CMYK or other
unusual JPEG modes, a JPEG it fails on) go through the reference decoding (PIL, ``load_image``) in the same
batch, so every image is encoded and the batches are the ones the reference path would make. The fallback is
per file: when the decoder refuses a batch, its files are decoded one by one and only the refused one goes
through PIL, so an image's pixels (and its cached vector) do not depend on its batch-mates. The decoder
libraries' versions (Pillow with its libjpeg, torchvision with the libjpeg-turbo and nvJPEG it bundles) are
in the identity (``pixel_decoders``): a decoder upgrade is another cache key.

The pixels differ from the reference path's by a few grey levels (another JPEG decoder's rounding, another
device's resampling): the path is part of the model's identity (``{"pixels": "device"}``), so its vectors are
cached apart and its runs are never mixed with reference runs; scripts/benchmarks/pixel_equivalence.py measures the
difference (docs/performance.md). Corruptions of the torch backend (``--corrupt-backend torch``) run on the device
too, on the images decoded here (encoding/device_conditions.py); other image conditions (the reference backend,
plug-in corruptions, shortcut probes) transform the decoded PIL image in the workers as on the reference path.
"""

from __future__ import annotations

import concurrent.futures

import numpy as np

from ..errors import VlbenchError
from .images import load_image

PIXEL_PATHS = ("reference", "device")  # --pixels
#: JPEG modes (PIL's names) the device decoder reads as PIL would: colour and grey (made RGB)
_DEVICE_MODES = ("RGB", "L")


def device_readable(path) -> bool:
    """True when the file is a JPEG whose pixels the device decoder reads (baseline or progressive, RGB or
    grey); anything else (PNG, CMYK, 16-bit, palette) goes through PIL."""
    from PIL import Image  # lazy: only the device path asks

    try:
        with Image.open(path) as im:
            return im.format == "JPEG" and im.mode in _DEVICE_MODES
    except Exception:
        return False


def _read(paths: list) -> list:
    out = []
    for p in paths:
        with open(p, "rb") as fh:
            out.append(fh.read())
    return out


class DeviceBatches:
    """Model-input batches of image files for ``--pixels device``: ``for keys, batch in DeviceBatches(...)``.

    The file bytes of batch i+1 are read in a thread while batch i decodes and runs; decoding and resizing are
    queued on the device without a synchronisation per batch."""

    def __init__(self, adapter, batches: list[list[str]], path_of: dict, stats):
        self.adapter, self.batches, self.path_of, self.stats = adapter, batches, path_of, stats
        self.device = str(getattr(adapter, "device", "cpu"))

    def _files(self, keys: list[str]) -> tuple[list, list, list]:
        paths = [str(self.path_of[k]) for k in keys]
        fast = [device_readable(p) for p in paths]
        return paths, fast, _read([p for p, f in zip(paths, fast) if f])

    def pixels_of(self, paths: list):
        """(the uint8 N x C x H x W pixels of ``paths`` on the device, how many were decoded on the device)."""
        fast = [device_readable(p) for p in paths]
        return self._pixels(paths, fast, _read([p for p, f in zip(paths, fast) if f]))

    def _decode(self, data: list) -> list:
        """The device decoder's image of each file's bytes, or None for a file it refuses. The batch is decoded
        at once; when the decoder refuses it, each file is decoded alone, so only the refused file goes through
        PIL and an image's pixels never depend on the files it shares a batch with."""
        import torch
        from torchvision.io import ImageReadMode, decode_jpeg

        def run(blobs):
            raw = [torch.frombuffer(bytearray(b), dtype=torch.uint8) for b in blobs]
            return decode_jpeg(raw, mode=ImageReadMode.RGB, device=self.device, apply_exif_orientation=True)

        try:
            return list(run(data))
        except RuntimeError:
            pass
        out: list = []
        for blob in data:
            try:
                out.append(run([blob])[0])
            except RuntimeError:  # this file only: the reference decoding (PIL) below
                out.append(None)
        return out

    def _pixels(self, paths: list, fast: list, data: list):
        """(pixels, how many files the device decoder took) of a batch."""
        images, on_device = self.images(paths, fast, data)
        return self.adapter.to_pixels(images), on_device  # one call: the processor resizes same-shape images together

    def images(self, paths: list, fast: list, data: list) -> tuple[list, int]:
        """(the decoded uint8 (3, H, W) tensor of each file on the device, how many the device decoder took);
        ``fast``: which files it may take (:func:`device_readable`), ``data``: their bytes, in order."""
        import torch

        images: list = [None] * len(paths)
        for i, t in zip([i for i, f in enumerate(fast) if f], self._decode(data) if data else []):
            images[i] = t
        on_device = sum(t is not None for t in images)
        for i, img in enumerate(images):
            if img is None:  # PIL, as the reference path decodes it, then on the device as the others
                rgb = np.asarray(load_image(paths[i]), dtype=np.uint8)
                images[i] = torch.from_numpy(rgb.copy()).permute(2, 0, 1).to(self.device)
        return images, on_device

    def __iter__(self):
        if not self.batches:
            return
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(self._files, self.batches[0])
            for i, keys in enumerate(self.batches):
                paths, fast, data = pending.result()
                if i + 1 < len(self.batches):
                    pending = pool.submit(self._files, self.batches[i + 1])
                pixels, on_device = self._pixels(paths, fast, data)
                self.stats.images_decoded += len(keys)
                self.stats.images_device_decoded += on_device
                yield keys, self.adapter.from_pixels(pixels)


def check_device_path(adapter, spec: str) -> None:
    """VlbenchError unless the adapter can take pixels made on the device (it has the pixel split)."""
    fn = getattr(adapter, "pixel_spec", None)
    if fn is None or fn() is None:
        raise VlbenchError(f"--pixels device needs a model whose preprocessing splits into uint8 pixels and a "
                           f"normalisation (clip, altclip, groupvit, siglip, fixed-resolution siglip2); "
                           f"{spec!r} has none", "leave --pixels out (the reference path) for this model")
