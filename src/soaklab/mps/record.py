"""The mps_start rule's record: whether the run asked for CUDA MPS, and what was done.

The request is the resolved run's `training.cuda_process_sharing` (run_config.json: resolution
already refused mps wherever it cannot work). A run that asks for mps gets the live
soaklab-recorded daemon of its GPU, started here if none runs (`soaklab mps start` with its
defaults); the daemon is not the run's: it outlives the DAG until `soaklab mps stop`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from soaklab.contract.contract import check_cuda_process_sharing
from soaklab.files.jsonfiles import write_json_atomic
from soaklab.mps.ownership import DaemonRecord
from soaklab.schemas import validate_artifact

MPS_RECORD_SCHEMA_VERSION = 1


def not_requested_record() -> dict[str, Any]:
    return {
        "schema_version": MPS_RECORD_SCHEMA_VERSION,
        "requested": False,
        "cuda_process_sharing": None,
        "daemon": None,
        "reason": "training.cuda_process_sharing is null: learner and collector keep separate CUDA contexts",
    }


def requested_record(daemon: DaemonRecord) -> dict[str, Any]:
    return {
        "schema_version": MPS_RECORD_SCHEMA_VERSION,
        "requested": True,
        "cuda_process_sharing": "mps",
        "daemon": daemon.as_json(),
        "reason": f"training.cuda_process_sharing is mps: daemon {daemon.name} serves {', '.join(daemon.gpu_uuids)}",
    }


def ensure_mps(sharing: Any, out: Path) -> dict[str, Any]:
    """Write the MPS record for a run, starting (or reusing) the daemon an mps run needs."""
    if check_cuda_process_sharing(sharing) == "mps":
        from soaklab.mps.daemon import StartRequest, start

        record = requested_record(start(StartRequest()))
        validate_artifact("mps_record", record)
        write_json_atomic(out, record)
        print(f"mps: requested; daemon {record['daemon']['name']}; wrote {out}")
        return record
    record = not_requested_record()
    validate_artifact("mps_record", record)
    write_json_atomic(out, record)
    print(f"mps: not requested; wrote {out}")
    return record
