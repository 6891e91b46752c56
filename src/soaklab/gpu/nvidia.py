"""NVIDIA GPUs as the driver's management interface sees them, without a CUDA context.

NVML (nvidia-ml-py) first, nvidia-smi second: neither creates a CUDA context, so the soak monitor
and config resolution can describe the GPUs without taking memory on them or fixing the MPS daemon
the process would talk to. Both list every GPU of the host in PCI bus order; `visible_gpus` maps
CUDA_VISIBLE_DEVICES onto that list the way the CUDA runtime does. Where the mapping is not certain
(MIG instances; unlike GPUs whose CUDA order may differ from the bus order), it answers None and
the caller falls back to asking CUDA itself.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

QUERY_TIMEOUT_S = 10.0
VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class GpuMemory:
    uuid: str
    name: str
    free_bytes: int
    total_bytes: int


def smi_query(*args: str) -> list[list[str]] | None:
    """Rows of an nvidia-smi CSV query, or None without a working nvidia-smi."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, *args, "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=QUERY_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return [[cell.strip() for cell in line.split(",")] for line in out.stdout.splitlines() if line.strip()]


def _nvml_gpus() -> list[GpuMemory] | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:  # no driver (a CPU host), or one NVML cannot load
        return None
    try:
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            uuid, name = pynvml.nvmlDeviceGetUUID(handle), pynvml.nvmlDeviceGetName(handle)
            gpus.append(GpuMemory(uuid.decode() if isinstance(uuid, bytes) else uuid,
                            name.decode() if isinstance(name, bytes) else name, int(memory.free), int(memory.total)))
        return gpus
    except pynvml.NVMLError:
        return None
    finally:
        pynvml.nvmlShutdown()


def _smi_gpus() -> list[GpuMemory] | None:
    rows = smi_query("--query-gpu=uuid,name,memory.free,memory.total")
    if rows is None:
        return None
    try:
        return [GpuMemory(r[0], r[1], int(r[2]) << 20, int(r[3]) << 20) for r in rows]
    except (IndexError, ValueError):
        return None


def host_gpus() -> list[GpuMemory] | None:
    """Every NVIDIA GPU of the host in bus order; None when neither NVML nor nvidia-smi answers."""
    gpus = _nvml_gpus()
    return gpus if gpus is not None else _smi_gpus()


def visible_indices(spec: str | None, gpus: list[GpuMemory]) -> list[int] | None:
    """Host indices CUDA_VISIBLE_DEVICES makes visible, in CUDA's order; None where unsure.

    As the CUDA runtime reads it: unset = all; entries are indices or (prefixes of) GPU UUIDs; the
    list ends at the first entry that names no GPU."""
    if spec is None:
        chosen = list(range(len(gpus)))
    else:
        chosen = []
        for entry in (e.strip() for e in spec.split(",")):
            if entry.startswith("MIG-"):
                return None
            if entry.isdigit():
                index = int(entry)
            else:
                matches = [i for i, g in enumerate(gpus) if entry and g.uuid.startswith(entry)]
                index = matches[0] if len(matches) == 1 else -1
            if not 0 <= index < len(gpus) or index in chosen:
                break
            chosen.append(index)
    # Without CUDA_DEVICE_ORDER=PCI_BUS_ID, CUDA puts the fastest GPU first; only GPUs of one model
    # are certain to keep the bus order.
    if os.environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID" and len({gpus[i].name for i in chosen}) > 1:
        return None
    return chosen


def visible_gpus() -> list[GpuMemory] | None:
    """The GPUs this process's CUDA would see, in its ordinal order; None where that is not certain."""
    gpus = host_gpus()
    if gpus is None:
        return None
    indices = visible_indices(os.environ.get(VISIBLE_ENV), gpus)
    return None if indices is None else [gpus[i] for i in indices]
