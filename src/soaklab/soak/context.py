"""Where and on what a soak ran: the soak JSON's context (docs/soak.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from soaklab.config.run_config import ResolvedRun
from soaklab.files.jsonfiles import sha256_file
from soaklab.host.info import cpu_identity, git_state, versions
from soaklab.soak import gpu

SOURCE_DIR = Path(__file__).resolve().parent


def soak_context(resolved: ResolvedRun, numerics: dict[str, Any] | None = None) -> dict[str, Any]:
    """`numerics`: the profile the run ran under, as soaklab.host.numerics.apply returned it (None: the
    host's own arithmetic)."""
    record = resolved.record()
    manifest = (record["run"].get("assets") or {}).get("manifest")
    gpus = gpu.gpu_identity()
    return {
        # The commit of the code that ran, found from this package's own source directory.
        **{f"soaklab_{k}": v for k, v in git_state(SOURCE_DIR).items()},
        "host": cpu_identity(),
        "gpus": gpus,
        "versions": versions(),
        "asset_manifest": manifest,
        "asset_manifest_sha256": sha256_file(Path(manifest)) if manifest and Path(manifest).is_file() else None,
        "config_hash": record["config_hash"],
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "numerics": numerics,
        # training.deterministic: its bits belong to the GPU model, driver and CUDA that made them
        # (soaklab.records.snapshot.machine_kind; docs/determinism.md)
        "determinism": determinism_context() if resolved.run.training.deterministic else None,
    }


def determinism_context() -> dict[str, Any]:
    """What a deterministic run's machine kind names beside the GPUs: the CUDA runtime torch runs on."""
    import torch

    return {"enabled": True, "cuda": torch.version.cuda}
