"""LoRA fine-tuning above the backends: training records, the run loop, its metrics and plot, `modelhost train`.

The backends do the numerics (TrainableModel/TrainerModel, e.g. modelhost.backends.transformers.training); this
package only needs those capabilities, so any backend that offers them trains through the same loop, CLI and job.
"""

from typing import TYPE_CHECKING

from modelhost._lazy import exports

if TYPE_CHECKING:
    from modelhost.training.data import Example, ExampleEncoder, read_jsonl
    from modelhost.training.run import TrainResult, TrainSettings, TrainStep, train, train_file

__all__ = [
    "Example",
    "ExampleEncoder",
    "TrainResult",
    "TrainSettings",
    "TrainStep",
    "read_jsonl",
    "train",
    "train_file",
]

# Imported at first use (modelhost._lazy): `modelhost --version` registers this package's command without them.
__getattr__ = exports(
    __name__,
    {
        "Example": "modelhost.training.data",
        "ExampleEncoder": "modelhost.training.data",
        "read_jsonl": "modelhost.training.data",
        "TrainResult": "modelhost.training.run",
        "TrainSettings": "modelhost.training.run",
        "TrainStep": "modelhost.training.run",
        "train": "modelhost.training.run",
        "train_file": "modelhost.training.run",
    },
)
