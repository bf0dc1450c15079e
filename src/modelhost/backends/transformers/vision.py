"""Image reading for the transformers backend: the contract's one images module (modelhost.inference.images).

Kept as a name so existing imports keep working; the bounds and the decoder live in the contract, shared with the
wire codec and the llama_cpp backend.
"""

from modelhost.inference.images import ENCODED_FORMATS, MAX_IMAGE_AXIS, MAX_IMAGE_PIXELS, to_rgb_image

__all__ = ["ENCODED_FORMATS", "MAX_IMAGE_AXIS", "MAX_IMAGE_PIXELS", "to_rgb_image"]
