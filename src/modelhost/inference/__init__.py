"""The inference contract: what a loaded model is, what an engine is, and how one is chosen.

This package imports nothing from the rest of modelhost (except its error family): backends import it, the host
and the doors use it, and it knows none of them.
"""

from modelhost.inference.capabilities import (
    Adapter,
    AttentionInspector,
    DeviceInfoProvider,
    TrainableModel,
    Trainer,
    TrainerModel,
    VisionModel,
    accepts_images,
    as_capability,
)
from modelhost.inference.model import Backend, FormatProbe, TextModel
from modelhost.inference.options import GenerateOptions, LoadOptions
from modelhost.inference.registry import (
    Registry,
    backend_device_info,
    default,
    default_registry,
    get,
    load_model,
    load_trainable,
    names,
    register,
)
from modelhost.inference.types import (
    AttentionSnapshot,
    BatchResult,
    ClassifyResult,
    DeviceInfo,
    FinishReason,
    GenerateMetrics,
    LoRAConfig,
    Message,
    ModelInfo,
    Token,
    TrainingConfig,
)

__all__ = [
    "Adapter",
    "AttentionInspector",
    "AttentionSnapshot",
    "Backend",
    "BatchResult",
    "ClassifyResult",
    "DeviceInfo",
    "DeviceInfoProvider",
    "FinishReason",
    "FormatProbe",
    "GenerateMetrics",
    "GenerateOptions",
    "LoRAConfig",
    "LoadOptions",
    "Message",
    "ModelInfo",
    "Registry",
    "TextModel",
    "Token",
    "TrainableModel",
    "Trainer",
    "TrainerModel",
    "TrainingConfig",
    "VisionModel",
    "accepts_images",
    "as_capability",
    "backend_device_info",
    "default",
    "default_registry",
    "get",
    "load_model",
    "load_trainable",
    "names",
    "register",
]
