"""Reading an image-text split from the Hub's parquet files (:mod:`.read`), within bounds (:mod:`.limits`)."""

from .limits import MAX_CAPTION_BYTES, max_image_bytes, unreadable
from .read import CAPTION_WORDS, TEXT_NAMES, caption_columns, image_column, read_split

__all__ = ["CAPTION_WORDS", "MAX_CAPTION_BYTES", "TEXT_NAMES", "caption_columns", "image_column", "max_image_bytes",
           "read_split", "unreadable"]
