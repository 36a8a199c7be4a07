"""A tiny dual encoder with its own code, as long-text models ship theirs: mean-pooled token and position
embeddings for text (248 positions, like Long-CLIP), a linear map of the pixels for images. It exposes both
interfaces vlbench reads: get_text_features / get_image_features, and encode_text / encode_image."""

import numpy as np
import torch
from transformers import PreTrainedModel

from .configuration_tinydual import TinyDualConfig


class TinyDualModel(PreTrainedModel):
    config_class = TinyDualConfig

    def __init__(self, config):
        super().__init__(config)
        self.tokens = torch.nn.Embedding(config.vocab_size, config.dim)
        self.positions = torch.nn.Embedding(config.max_position_embeddings, config.dim)
        self.pixels = torch.nn.Linear(3 * config.image_size * config.image_size, config.dim)
        self.post_init()

    def _init_weights(self, module):
        if isinstance(module, (torch.nn.Embedding, torch.nn.Linear)):
            module.weight.data.normal_(0.0, 0.02)
            if getattr(module, "bias", None) is not None:
                module.bias.data.zero_()

    def get_text_features(self, input_ids, attention_mask=None):
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        h = self.tokens(input_ids) + self.positions(pos)[None]
        mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
        return (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)

    def get_image_features(self, pixel_values):
        return self.pixels(pixel_values.flatten(1))

    # jina-clip's interface: raw strings and PIL images in, numpy out (a task for queries)
    def encode_text(self, sentences, task=None):
        ids = [[(sum(map(ord, w)) % (self.config.vocab_size - 1)) + 1 for w in s.split()][:248] or [1]
               for s in sentences]
        width = max(len(x) for x in ids)
        input_ids = torch.tensor([x + [0] * (width - len(x)) for x in ids])
        mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in ids])
        out = self.get_text_features(input_ids, mask)
        if task == "retrieval.query":
            out = out + 0.0  # a real model would add its task adapter here
        return out.detach().numpy()

    def encode_image(self, images):
        size = self.config.image_size
        arr = np.stack([np.asarray(im.convert("RGB").resize((size, size)), dtype=np.float32) / 255.0
                        for im in images])
        pix = torch.from_numpy(arr).permute(0, 3, 1, 2)
        return self.get_image_features(pix).detach().numpy()
