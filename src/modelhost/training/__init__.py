"""LoRA fine-tuning above the backends: training records, the run loop, its metrics and plot, `modelhost train`.

The backends do the numerics (TrainableModel/TrainerModel, e.g. modelhost.backends.transformers.training); this
package only needs those capabilities, so any backend that offers them trains through the same loop, CLI and job.
"""

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
