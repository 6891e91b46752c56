"""Which physical GPU a CUDA MPS daemon serves: selectors resolve to canonical UUIDs (docs/mps.md).

A selector is a visible index or a GPU UUID (a unique prefix is enough). MIG
UUIDs are rejected (an MPS daemon here serves a whole GPU), and requests for
several GPUs parse into a topology mode that fails closed until a multi-GPU
gate exists; `all` is allowed for the read-only commands only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

from soaklab.errors import InvalidInput

NVIDIA_SMI = "nvidia-smi"
SMI_TIMEOUT_S = 30.0

# The topology modes every command reports, so a future launch contract only adds to them.
TOPOLOGY_MODES: dict[str, str] = {
    "single_gpu": "implemented: one task on one physical GPU",
    "single_task_multi_gpu": "parsed, fails closed: one task with a rank per GPU",
    "task_per_gpu": "parsed, fails closed: independent tasks packed one per GPU",
}


@dataclass(frozen=True)
class PhysicalGpu:
    index: int  # nvidia-smi's physical index
    uuid: str  # canonical "GPU-..." UUID
    name: str
    compute_mode: str


def parse_gpu_csv(text: str) -> list[PhysicalGpu]:
    """Rows of `nvidia-smi --query-gpu=index,uuid,name,compute_mode --format=csv,noheader`."""
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 4 or not fields[0].isdigit():
            raise InvalidInput(f"nvidia-smi: unexpected GPU row {line.strip()!r}")
        gpus.append(PhysicalGpu(index=int(fields[0]), uuid=fields[1], name=fields[2], compute_mode=fields[3]))
    return gpus


def visible(gpus: list[PhysicalGpu], mask: str | None) -> list[PhysicalGpu]:
    """The GPUs a CUDA process sees under CUDA_VISIBLE_DEVICES (indices or UUID prefixes), in mask order."""
    if mask is None:
        return list(gpus)
    out: list[PhysicalGpu] = []
    for item in (m.strip() for m in mask.split(",")):
        if not item:
            break  # CUDA stops at the first invalid entry
        match = [g for g in gpus if (item.isdigit() and g.index == int(item)) or
                 (not item.isdigit() and g.uuid.startswith(item))]
        if len(match) != 1:
            break
        out.append(match[0])
    return out


def query_gpus() -> list[PhysicalGpu]:
    """The GPUs this process may use; fails closed without nvidia-smi."""
    if shutil.which(NVIDIA_SMI) is None:
        raise InvalidInput("nvidia-smi: not found; CUDA MPS needs an NVIDIA GPU and its driver on this host")
    done = subprocess.run([NVIDIA_SMI, "--query-gpu=index,uuid,name,compute_mode", "--format=csv,noheader"],
                          capture_output=True, text=True, timeout=SMI_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise InvalidInput(f"nvidia-smi: exit {done.returncode}: {done.stderr.strip() or done.stdout.strip()}")
    return visible(parse_gpu_csv(done.stdout), os.environ.get("CUDA_VISIBLE_DEVICES"))


def select_gpus(selector: str | None, gpus: list[PhysicalGpu], allow_all: bool = False) -> list[PhysicalGpu]:
    """Resolve `--gpus` against the visible GPUs. Only `all` (read-only commands) yields several."""
    flag = "--gpus"
    if selector is not None:
        selector = selector.strip()
    if selector == "all":
        if not allow_all:
            raise InvalidInput(f"{flag}=all: start serves one GPU (topology single_gpu); "
                               "`all` is for the read-only doctor and status")
        return list(gpus)
    if selector is not None and "," in selector:
        mode = "single_task_multi_gpu"
        raise InvalidInput(f"{flag}={selector}: several GPUs parse as topology {mode} or task_per_gpu, which fail "
                           "closed until a multi-GPU gate exists; pass one index or UUID")
    if not gpus:
        raise InvalidInput("no NVIDIA GPU is visible (check CUDA_VISIBLE_DEVICES); CUDA MPS needs one")
    if selector is None or selector == "":
        if len(gpus) > 1:
            listing = ", ".join(f"{g.index}={g.uuid}" for g in gpus)
            raise InvalidInput(f"{flag}: {len(gpus)} GPUs are visible ({listing}); pass --gpus <index-or-uuid>")
        return [gpus[0]]
    if selector.startswith("MIG-"):
        raise InvalidInput(f"{flag}={selector}: MIG UUIDs are rejected; CUDA MPS here serves a whole GPU "
                           "(pass the parent GPU's index or UUID)")
    if selector.isdigit():
        match = [g for g in gpus if g.index == int(selector)]
    else:
        match = [g for g in gpus if g.uuid.startswith(selector) or g.uuid == f"GPU-{selector}"]
    if len(match) != 1:
        listing = ", ".join(f"{g.index}={g.uuid}" for g in gpus)
        what = "matches no" if not match else "matches several"
        raise InvalidInput(f"{flag}={selector}: {what} visible GPU ({listing})")
    return match
