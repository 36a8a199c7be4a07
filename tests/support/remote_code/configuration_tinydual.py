"""Code shipped inside a tiny test checkpoint (copied into its folder; loaded by transformers' auto_map)."""

from transformers import PretrainedConfig


class TinyDualConfig(PretrainedConfig):
    model_type = "tiny-dual"

    def __init__(self, vocab_size=49408, dim=16, image_size=32, max_position_embeddings=248, **kwargs):
        self.vocab_size = vocab_size
        self.dim = dim
        self.image_size = image_size
        self.max_position_embeddings = max_position_embeddings
        super().__init__(**kwargs)
