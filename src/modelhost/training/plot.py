"""The loss curve of a run as a PNG (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelhost.training.run import TrainResult


def plot_losses(result: TrainResult, path: Path) -> Path:
    """Training loss per step (log scale when it spans more than a decade) and evaluation losses as points."""
    import matplotlib

    matplotlib.use("Agg")  # no display here, and a GUI backend would open windows from a worker thread
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    try:
        steps = list(range(1, len(result.losses) + 1))
        ax.plot(steps, result.losses, label="train", linewidth=1.5)
        if result.evals:
            ax.plot([s for s, _ in result.evals], [v for _, v in result.evals], "o-", label="eval")
        positive = [v for v in result.losses + [v for _, v in result.evals] if v > 0]
        if positive and max(positive) / min(positive) > 10:
            ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.set_ylabel("loss (per trained token)")
        title = f"LoRA fine-tune: {result.steps} steps, {result.tokens_per_second:.0f} tokens/s"
        ax.set_title(title + (" (cancelled)" if result.cancelled else ""))
        ax.grid(True, alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(str(path))
    finally:
        plt.close(fig)
    return path
