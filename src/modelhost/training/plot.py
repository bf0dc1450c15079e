"""The loss curve of a run as a PNG (matplotlib, headless)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def plot_losses(losses: Sequence[float], evals: Sequence[tuple[int, float]], title: str, path: Path) -> Path:
    """Training loss per step (log scale when it spans more than a decade) and evaluation losses (step, loss) as
    points. Takes the figures, not run.py's TrainResult, so this module imports nothing of the training loop."""
    import matplotlib

    matplotlib.use("Agg")  # no display here, and a GUI backend would open windows from a worker thread
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    try:
        steps = list(range(1, len(losses) + 1))
        ax.plot(steps, list(losses), label="train", linewidth=1.5)
        if evals:
            ax.plot([s for s, _ in evals], [v for _, v in evals], "o-", label="eval")
        positive = [v for v in [*losses, *(v for _, v in evals)] if v > 0]
        if positive and max(positive) / min(positive) > 10:
            ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.set_ylabel("loss (per trained token)")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(str(path))
    finally:
        plt.close(fig)
    return path
