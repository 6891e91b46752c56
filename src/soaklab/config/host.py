"""What this host offers a run, probed or simulated (docs/settings-contract.md, "Devices").

GPUs are described through NVML (soaklab.gpu.nvidia), which creates no CUDA context: the soak monitor
re-checks a run on its host without taking GPU memory, and a trainer probes before it has chosen
its MPS daemon. Only where NVML cannot say (no NVIDIA driver library: a CPU or ROCm host; MIG;
mixed GPU models) does the probe ask torch, and a caller that must not touch CUDA gets torch's
device count alone.
"""

from __future__ import annotations

import os
from dataclasses import fields
from typing import Any

from soaklab.contract.devices import ALLOW_CPU_CARRIER_ENV, HostCapabilities
from soaklab.errors import InvalidInput, format_value
from soaklab.files.jsonfiles import loads_checked

HOST_CAPABILITIES_ENV = "SOAKLAB_HOST_CAPABILITIES"
def allow_cpu_carrier_from_env() -> bool:
    return os.environ.get(ALLOW_CPU_CARRIER_ENV, "") == "1"


def _probe_memory() -> tuple[int, int]:
    import psutil

    shm = os.statvfs("/dev/shm") if os.path.isdir("/dev/shm") else None
    shm_free = shm.f_bavail * shm.f_frsize if shm else 0
    return shm_free, int(psutil.virtual_memory().available)


def probe_host(cuda_context: bool = True) -> HostCapabilities:
    """Probe this host, unless SOAKLAB_HOST_CAPABILITIES simulates one (JSON object).

    cuda_context=False: never create a CUDA context, even where NVML cannot describe the GPUs."""
    simulated = os.environ.get(HOST_CAPABILITIES_ENV)
    if simulated:
        return simulated_host(simulated)
    from soaklab.gpu.nvidia import visible_gpus

    shm_free, mem_available = _probe_memory()
    gpus = visible_gpus()
    if gpus is not None:
        return HostCapabilities(cuda_device_count=len(gpus), cuda_free_bytes=tuple(g.free_bytes for g in gpus),
                                shm_free_bytes=shm_free, mem_available_bytes=mem_available, source="probed (nvml)")
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count and not cuda_context and torch.version.hip is None:
        # Free memory would need a context, which would also fix the MPS daemon this process uses.
        raise InvalidInput("CUDA_VISIBLE_DEVICES: NVML cannot describe these GPUs (MIG instances, or GPUs of "
                           "different models) and this process must not create a CUDA context; select whole GPUs "
                           "of one model, or set CUDA_DEVICE_ORDER=PCI_BUS_ID")
    free = tuple(torch.cuda.mem_get_info(i)[0] for i in range(count))
    return HostCapabilities(
        cuda_device_count=count,
        cuda_free_bytes=free,
        apple_mps=bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()),
        rocm=torch.version.hip is not None,
        shm_free_bytes=shm_free,
        mem_available_bytes=mem_available,
        source="probed (torch)",
    )


# The described host's fields by kind: whole numbers that count or measure (never negative, never a
# float: JSON's 1e400 and Infinity parse as float inf), lists of them, and yes/no flags.
_COUNTS = ("cuda_device_count", "current_cuda_device", "shm_free_bytes", "mem_available_bytes")
_COUNT_LISTS = ("cuda_free_bytes", "cpu_ids")
_FLAGS = ("apple_mps", "rocm")


def _count(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key}={format_value(value)}: must be a whole number >= 0")
    return value


def _checked(values: dict[str, Any]) -> dict[str, Any]:
    """The described fields, each of its kind (ValueError naming the first that is not)."""
    checked: dict[str, Any] = {}
    for key, value in values.items():
        if key in _COUNTS:
            checked[key] = _count(key, value)
        elif key in _COUNT_LISTS:
            if not isinstance(value, list):
                raise ValueError(f"{key}={format_value(value)}: must be a list of whole numbers >= 0")
            checked[key] = tuple(_count(f"{key}[{i}]", v) for i, v in enumerate(value))
        elif key in _FLAGS:
            if not isinstance(value, bool):
                raise ValueError(f"{key}={format_value(value)}: must be true or false")
            checked[key] = value
        else:  # `source`: what the record says, always "simulated" here
            checked[key] = value
    return checked


def simulated_host(text: str) -> HostCapabilities:
    """Build host capabilities from JSON; unspecified memory figures are probed."""
    try:
        values = loads_checked(text, HOST_CAPABILITIES_ENV)
        if not isinstance(values, dict):
            raise ValueError("not a JSON object")
        known = {f.name for f in fields(HostCapabilities)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown field {unknown[0]!r}; known: {', '.join(sorted(known))}")
        values = _checked(values)
        count = values.get("cuda_device_count", 0)
        if "cuda_free_bytes" in values and len(values["cuda_free_bytes"]) != count:
            raise ValueError(f"cuda_free_bytes lists {len(values['cuda_free_bytes'])} devices, "
                             f"cuda_device_count={count}: one entry per device")
        if values.get("current_cuda_device", 0) >= max(count, 1):
            raise ValueError(f"current_cuda_device={values['current_cuda_device']}: must be below "
                             f"cuda_device_count={count}")
        shm_free, mem_available = _probe_memory()
        values.setdefault("shm_free_bytes", shm_free)
        values.setdefault("mem_available_bytes", mem_available)
        values.setdefault("cuda_free_bytes", tuple([80 << 30] * count))
        values["source"] = "simulated"
        return HostCapabilities(**values)
    except (ValueError, TypeError) as exc:
        raise InvalidInput(f"{HOST_CAPABILITIES_ENV}: invalid host description ({exc})") from None
