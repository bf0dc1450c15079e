"""The transformers backend: Hugging Face model folders and GGUF files, text and vision-language models.

Importing this package is cheap: torch and transformers are imported when a model is loaded (or a device is
described), so the registry can list this backend on a machine without them and `available()` says False there.
"""

from modelhost.backends.transformers.backend import TransformersBackend

__all__ = ["TransformersBackend"]
