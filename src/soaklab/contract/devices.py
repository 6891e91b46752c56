"""Device resolution: a pure function of (config values, host capabilities) (docs/settings-contract.md).

``training.device`` names the learner's torch device. ``training.collector_tensor_device``
asks where the collector's tensors live (the "carrier"); the answer depends on
whether the sim backend is a host bridge (mujoco: state copied into host
memory, then exposed as tensors) or device-resident (mjwarp: state already
lives on the learner's GPU). The inference transport is derived from the
carrier, never configured.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any

from soaklab.catalogue import BACKENDS, DEVICE_RESIDENT
from soaklab.errors import SettingError

ALLOW_CPU_CARRIER_ENV = "SOAKLAB_ALLOW_CUDA_LEARNER_CPU_CARRIER"

# How each sim backend places the collector's tensors: the catalogue's fact of each backend.
BACKEND_PLACEMENT = {name: backend.placement for name, backend in BACKENDS.items()}

CARRIER_REQUESTS = ("auto", "cpu", "cuda")
_LEARNER_RE = re.compile(r"^(cpu|mps|cuda)(?::(\d+))?$")


@dataclass(frozen=True)
class HostCapabilities:
    """What the host offers; probed or simulated by soaklab.config.host."""

    cuda_device_count: int = 0
    # Free bytes per visible CUDA device, in ordinal order.
    cuda_free_bytes: tuple[int, ...] = ()
    current_cuda_device: int = 0
    apple_mps: bool = False
    # A ROCm/HIP torch build reports CUDA devices but has no CUDA MPS.
    rocm: bool = False
    shm_free_bytes: int = 0
    mem_available_bytes: int = 0
    # The cores this host gives a run's collectors; () means this process's own affinity. A described
    # host names them, so that a plan made for another machine (the support matrix) does not depend
    # on the cores of the machine making it.
    cpu_ids: tuple[int, ...] = ()
    source: str = "probed"

    @property
    def has_cuda(self) -> bool:
        return self.cuda_device_count > 0

    def as_record(self) -> dict[str, Any]:
        record = {f.name: getattr(self, f.name) for f in fields(self)}
        record["cuda_free_bytes"] = list(self.cuda_free_bytes)
        record["cpu_ids"] = list(self.cpu_ids)
        if not self.cpu_ids:  # probed: the run config records the plan's cores, not the host's
            del record["cpu_ids"]
        return record


@dataclass(frozen=True)
class ResolvedDevices:
    """Configured -> resolved device mapping, as run_config.json records it."""

    learner_configured: str
    learner: str
    carrier_configured: str
    carrier: str
    carrier_ignored: bool
    carrier_reason: str
    sim_backend: str
    inference_transport: str = field(init=False)

    def __post_init__(self) -> None:
        # Derived, never configured: a cpu carrier means the host ring, cuda the CUDA ring.
        transport = "host_ring" if self.carrier == "cpu" else "cuda_ring"
        object.__setattr__(self, "inference_transport", transport)

    def as_record(self) -> dict[str, Any]:
        return {
            "learner": {"configured": self.learner_configured, "resolved": self.learner},
            "collector_tensor": {
                "configured": self.carrier_configured,
                "resolved": self.carrier,
                "ignored": self.carrier_ignored,
                "reason": self.carrier_reason,
            },
            "inference_transport": {"configured": None, "resolved": self.inference_transport},
        }

    def mapping_line(self) -> str:
        ignored = " (ignored)" if self.carrier_ignored else ""
        return (
            f"devices: learner {self.learner_configured} -> {self.learner}; "
            f"collector_tensor {self.carrier_configured} -> {self.carrier}{ignored} "
            f"[{self.sim_backend}: {self.carrier_reason}]; inference transport {self.inference_transport}"
        )


def _resolve_learner(request: Any, host: HostCapabilities) -> str:
    key = "training.device"
    match = _LEARNER_RE.match(request) if isinstance(request, str) else None
    if match is None or (match.group(1) != "cuda" and match.group(2) is not None):
        raise SettingError(key, request, "must be a concrete torch device: cpu, cuda, cuda:N or mps")
    kind, ordinal = match.group(1), match.group(2)
    if kind == "cpu":
        return "cpu"
    if kind == "mps":
        if not host.apple_mps:
            raise SettingError(key, request, "this host has no Apple mps device; use training.device=cpu")
        return "mps"
    if not host.has_cuda:
        raise SettingError(key, request, "this host has no CUDA device; use training.device=cpu")
    index = host.current_cuda_device if ordinal is None else int(ordinal)
    if index >= host.cuda_device_count:
        raise SettingError(
            key, request, f"this host has {host.cuda_device_count} visible CUDA device(s): use cuda:0..cuda:"
            f"{host.cuda_device_count - 1} (select GPUs with CUDA_VISIBLE_DEVICES)"
        )
    return f"cuda:{index}"


def resolve_devices(
    learner_request: Any,
    carrier_request: Any,
    sim_backend: str,
    cuda_process_sharing: str | None,
    host: HostCapabilities,
    allow_cuda_learner_cpu_carrier: bool = False,
) -> ResolvedDevices:
    """Resolve the learner device and the collector carrier by the carrier table of docs/settings-contract.md."""
    carrier_key = "training.collector_tensor_device"
    if carrier_request not in CARRIER_REQUESTS:
        hint = " (no ordinal: the ordinal follows the learner)" if str(carrier_request).startswith("cuda:") else ""
        raise SettingError(carrier_key, carrier_request, f"must be auto, cpu or cuda{hint}")
    placement = BACKEND_PLACEMENT.get(sim_backend)
    if placement is None:
        raise SettingError("training.sim_backend", sim_backend, f"must be one of {', '.join(BACKEND_PLACEMENT)}")

    learner = _resolve_learner(learner_request, host)
    learner_is_cuda = learner.startswith("cuda")

    if placement == DEVICE_RESIDENT:
        if not learner_is_cuda:
            raise SettingError(
                "training.device", learner_request,
                f"sim={sim_backend} keeps its state on the GPU and needs a CUDA learner (training.device=cuda)",
            )
        if carrier_request == "cuda":
            raise SettingError(
                carrier_key, carrier_request,
                f"sim={sim_backend} is device-resident and has no host-bridge carrier; use auto",
            )
        carrier, ignored = learner, True
        reason = "device-resident backend owns placement (the learner's GPU)"
    elif carrier_request == "auto":
        carrier, ignored = (learner if learner_is_cuda else "cpu"), False
        reason = "host bridge follows the learner"
    elif carrier_request == "cpu":
        if learner_is_cuda and not (allow_cuda_learner_cpu_carrier or host.rocm):
            raise SettingError(
                carrier_key, carrier_request,
                f"a CPU carrier with a CUDA learner ({learner}) is refused: use auto or cuda, or set "
                f"{ALLOW_CPU_CARRIER_ENV}=1 to keep that topology for attribution baselines",
            )
        carrier, ignored, reason = "cpu", False, "host bridge, explicit cpu"
    else:  # cuda
        if not host.has_cuda:
            raise SettingError(
                carrier_key, carrier_request,
                "this host has no CUDA device (cuda never maps to Apple mps); use auto or cpu",
            )
        carrier = learner if learner_is_cuda else f"cuda:{host.current_cuda_device}"
        ignored, reason = False, "host bridge, explicit cuda (rank-local ordinal)"

    if cuda_process_sharing == "mps" and (placement != DEVICE_RESIDENT or host.rocm or not learner_is_cuda):
        raise SettingError(
            "training.cuda_process_sharing", cuda_process_sharing,
            f"mps is only for single-rank sim=mjwarp with a CUDA learner on an NVIDIA host (here sim={sim_backend})",
        )
    return ResolvedDevices(
        learner_configured=str(learner_request),
        learner=learner,
        carrier_configured=str(carrier_request),
        carrier=carrier,
        carrier_ignored=ignored,
        carrier_reason=reason,
        sim_backend=sim_backend,
    )
