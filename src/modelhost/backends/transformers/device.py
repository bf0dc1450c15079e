"""Which device a model runs on, what that device is, and how much memory it holds.

torch is imported inside the functions: describing a device is the only reason to pay for it before a load.
"""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path
from typing import TYPE_CHECKING

from modelhost.inference.types import DeviceInfo

if TYPE_CHECKING:
    import torch


def pick_device(gpu_layers: int | None) -> torch.device:
    """CUDA, then Apple's MPS, then the CPU. `gpu_layers=0` keeps the model on the CPU.

    transformers has no partial offload without accelerate's device maps, so any other `gpu_layers` value (-1 = all,
    or a count, as llama.cpp spells it) means "the whole model on the accelerator when there is one".
    """
    import torch

    if gpu_layers == 0:
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def describe_device(device: torch.device) -> DeviceInfo:
    """Name, architecture and memory of `device`. 0 stands for what the device does not report."""
    import torch

    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        arch = getattr(props, "gcnArchName", "") if torch.version.hip else f"sm_{props.major}{props.minor}"
        return DeviceInfo(name=props.name, architecture=arch, memory_size=int(props.total_memory))
    if device.type == "mps":
        recommended = 0
        with contextlib.suppress(AttributeError, RuntimeError):  # older torch, or a driver that will not say
            recommended = int(torch.mps.recommended_max_memory())
        # Apple GPUs share system memory: its size is the machine's RAM.
        return DeviceInfo(
            name="Apple GPU (mps)",
            architecture=platform.machine(),
            memory_size=total_ram(),
            max_recommended_working_set_size=recommended,
        )
    return DeviceInfo(name=cpu_name(), architecture=platform.machine(), memory_size=total_ram())


def cpu_name() -> str:
    """The processor's marketing name ("AMD EPYC 7B13"), or the best the platform offers."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        try:
            for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "Hardware") and value.strip():
                    return value.strip()
        except OSError:
            pass
    return platform.processor() or platform.machine() or "cpu"


def total_ram() -> int:
    """Physical memory in bytes, or 0 where the platform does not say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return 0


def reset_peak_memory(device: torch.device) -> None:
    """Start a new peak-memory window for the next operation (CUDA keeps one per device)."""
    import torch

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def memory_usage(device: torch.device) -> tuple[int, int]:
    """(peak, active) bytes allocated on `device` since the last reset; (0, 0) where the device does not report.

    The CPU reports nothing per operation: a process-wide RSS would count the Python heap and the model's weights,
    which is not what a caller reading "memory of this generation" means.
    """
    import torch

    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device)), int(torch.cuda.memory_allocated(device))
    if device.type == "mps":
        try:
            active = int(torch.mps.current_allocated_memory())
            return int(torch.mps.driver_allocated_memory()), active
        except (AttributeError, RuntimeError):
            return 0, 0
    return 0, 0
