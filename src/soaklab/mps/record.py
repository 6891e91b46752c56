"""The mps_start rule's record: whether the run asked for CUDA MPS, and what was done.

The request is read from the run's own `training.cuda_process_sharing` override
(owners always leave it null, seed 000), so this step does not depend on config
composition; `soaklab config resolve` later checks the composed value against
this record. Until the MPS lifecycle (`soaklab mps start|stop|status|doctor|env`)
lands, a run that asks for mps fails closed here, before anything is resolved
or spawned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from soaklab.errors import SettingError
from soaklab.jsonfiles import write_json_atomic
from soaklab.schemas import load_artifact, validate_artifact
from soaklab.settings.contract import check_cuda_process_sharing

MPS_RECORD_SCHEMA_VERSION = 1


def not_requested_record() -> dict[str, Any]:
    return {
        "schema_version": MPS_RECORD_SCHEMA_VERSION,
        "requested": False,
        "cuda_process_sharing": None,
        "daemon": None,
        "reason": "training.cuda_process_sharing is null: learner and collector keep separate CUDA contexts",
    }


def ensure_mps(sharing: Any, out: Path) -> dict[str, Any]:
    """Write the MPS record for a run; refuse an MPS request this version cannot serve."""
    if check_cuda_process_sharing(sharing) == "mps":
        raise SettingError(
            "training.cuda_process_sharing", sharing,
            "the CUDA MPS lifecycle (soaklab mps start) is not available in this version; "
            "remove the override to run without MPS",
        )
    record = not_requested_record()
    validate_artifact("mps_record", record)
    write_json_atomic(out, record)
    print(f"mps: not requested; wrote {out}")
    return record


def read_mps_record(path: Path) -> dict[str, Any]:
    return load_artifact("mps_record", path, "rerun the mps_start step")


def check_mps_record(record: dict[str, Any], sharing: str | None, path: Path) -> None:
    """The composed config and the mps_start record must agree on the sharing mode."""
    if record["cuda_process_sharing"] != sharing:
        raise SettingError(
            "training.cuda_process_sharing", sharing,
            f"{path} records {record['cuda_process_sharing']!r}; rerun mps_start for this run",
        )
