"""The tensor-runtime settings contract (DESIGN §5): knobs, devices, memory budget.

Later stages receive only the frozen :class:`RuntimeSettings` resolved here.
"""

from soaklab.settings.budget import MemoryBudget, check_memory_budget, compute_memory_budget
from soaklab.settings.contract import (
    KNOBS,
    RuntimeKnob,
    RuntimeSettings,
    check_exact_int,
    resolve_runtime_settings,
)
from soaklab.settings.devices import HostCapabilities, ResolvedDevices, probe_host, resolve_devices
from soaklab.settings.removed import REMOVED_KEYS, check_removed_keys

__all__ = [
    "KNOBS",
    "REMOVED_KEYS",
    "HostCapabilities",
    "MemoryBudget",
    "ResolvedDevices",
    "RuntimeKnob",
    "RuntimeSettings",
    "check_exact_int",
    "check_memory_budget",
    "check_removed_keys",
    "compute_memory_budget",
    "probe_host",
    "resolve_devices",
    "resolve_runtime_settings",
]
