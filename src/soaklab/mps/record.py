"""The mps_start rule's record: whether the run asked for CUDA MPS, and what was done.

Until the MPS lifecycle (`soaklab mps start|stop|status|doctor|env`) lands, a
run that asks for `training.cuda_process_sharing: mps` fails closed here, before
any config is resolved or process spawned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from soaklab.config.compose import compose
from soaklab.errors import SettingError
from soaklab.jsonfiles import write_json_atomic
from soaklab.schemas import validate_artifact
from soaklab.settings.contract import check_cuda_process_sharing

MPS_RECORD_SCHEMA_VERSION = 1


def not_requested_record(algo: str, task: str, sim: str) -> dict[str, Any]:
    return {
        "schema_version": MPS_RECORD_SCHEMA_VERSION,
        "run": {"algo": algo, "task": task, "sim": sim},
        "requested": False,
        "cuda_process_sharing": None,
        "daemon": None,
        "reason": "training.cuda_process_sharing is null: learner and collector keep separate CUDA contexts",
    }


def ensure_mps(algo: str, task: str, sim: str, overrides: list[str], out: Path) -> dict[str, Any]:
    """Write the mps record for a run; refuse an MPS request this version cannot serve."""
    composed = compose(algo, task, sim, overrides)
    sharing = check_cuda_process_sharing(composed.get("training.cuda_process_sharing"))
    if sharing == "mps":
        raise SettingError(
            "training.cuda_process_sharing", sharing,
            "the CUDA MPS lifecycle (soaklab mps start) is not available in this version; "
            "remove the override to run without MPS",
        )
    record = not_requested_record(algo, task, sim)
    validate_artifact("mps_record", record)
    write_json_atomic(out, record)
    print(f"mps: not requested for {algo}/{task}/{sim}; wrote {out}")
    return record
