"""Keys removed from the contract; each fails closed with its migration (docs/settings-contract.md)."""

from __future__ import annotations

from collections.abc import Iterable

from soaklab.errors import InvalidInput

# key -> what replaces it. `manager_torch_device` is also caught in its bare spelling.
REMOVED_KEYS: dict[str, str] = {
    "training.sim_carrier_device": "use training.collector_tensor_device (auto | cpu | cuda)",
    "training.inference_transport": (
        "use training.collector_tensor_device; the inference transport is derived from the carrier"
    ),
    "env.sim_carrier_device": "use env.collector_tensor_device (resolved from training.collector_tensor_device)",
    "env.manager_torch_device": "use env.collector_tensor_device (resolved from training.collector_tensor_device)",
    "manager_torch_device": "use env.collector_tensor_device (resolved from training.collector_tensor_device)",
    "env.tensor_runtime_device": "removed: the env follows the resolved learner device (training.device)",
    "env.tensor_runtime": "removed: the runtime is always tensor-native",
    "training.devices": "removed: select the GPU with CUDA_VISIBLE_DEVICES",
}


class RemovedKeyError(InvalidInput):
    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"{key}: this key was removed; {REMOVED_KEYS[key]}")


def check_removed_keys(keys: Iterable[str]) -> None:
    """Raise on the first removed key among dotted ``keys``."""
    for key in keys:
        if key in REMOVED_KEYS:
            raise RemovedKeyError(key)
