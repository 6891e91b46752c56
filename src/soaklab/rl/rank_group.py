"""One learner's place in a data-parallel group (docs/runtime.md, "Data parallelism"): joined by a
FileStore rendezvous in the run dir, watched for the other ranks' end, left (aborted when the run
failed, since a peer may still wait in a collective), and, on rank 0, every other rank's report
collected and the failure of the rank that ended the run adopted as the run's."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from soaklab.rl.dp import DataParallel
from soaklab.rl.ranks import RankContext, RankWatch, collect_reports, end_peers
from soaklab.rl.shutdown import Shutdown

JOIN_TIMEOUT_S = 5.0
RANK_REPORT_TIMEOUT_S = 60.0  # each rank's own shutdown: collector join, shared memory, CUDA IPC


class RankGroup:
    """The group as one rank sees it once joined. `records` (rank 0): every rank's placement, for the
    manifest."""

    def __init__(self, rank: RankContext, dp: DataParallel, watch: RankWatch,
                 records: list[dict[str, Any]] | None) -> None:
        self.rank, self.dp, self.watch, self.records = rank, dp, watch, records

    @classmethod
    def join(cls, rank: RankContext, run_dir: Path, device: torch.device, carrier: str,
             on_stuck: Callable[[str], None]) -> RankGroup:
        """Join, start watching the other ranks (`on_stuck`: the watch thread's last resort), and
        share this rank's placement with rank 0."""
        dp = DataParallel.join(run_dir, rank.rank, rank.world_size, rank.backend, rank.gone)
        watch = RankWatch(rank, dp, on_stuck)
        on_cuda = device.type == "cuda"
        record = {"rank": rank.rank, "pid": os.getpid(), "collector_backend_device": carrier,
                  "gpu_uuid": str(torch.cuda.get_device_properties(device).uuid) if on_cuda else None,
                  "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES") if on_cuda else None,
                  "cpu_ids": list(rank.cpu_ids) if rank.cpu_ids is not None else None}
        return cls(rank, dp, watch, dp.gather_records(record))

    def check(self) -> None:
        """Raise if another rank has gone (a safe point of the training thread)."""
        self.watch.check()

    def leave(self, completed: bool) -> None:
        """Stop watching and leave the process group."""
        self.watch.close()
        if not completed and self.dp.backend == "nccl":
            self.dp.abort()
        else:
            self.dp.close()


def leave_group(rank: RankContext, group: RankGroup | None, run_dir: Path, completed: bool, shutdown: Shutdown
                ) -> list[dict[str, Any] | None] | None:
    """Leave the group (if it was joined); rank 0 then collects every rank's report (returned) and
    adopts, in `shutdown`, the failure of the rank that ended the run (first_failure)."""
    if group is not None:
        group.leave(completed)
    if rank.rank != 0:
        return None
    reports = collect_peers(rank, run_dir)
    failure = first_failure(reports, rank.peers, shutdown.classification)
    if failure is not None:
        shutdown.classification, shutdown.owner, shutdown.exception = failure
    return reports


def collect_peers(rank: RankContext, run_dir: Path) -> list[dict[str, Any] | None]:
    """Rank 0, at its end (joined or not): every other rank's report (None for one that sent none),
    then the other ranks ended."""
    (run_dir / ".dp-rendezvous").unlink(missing_ok=True)
    reports = collect_reports(rank, RANK_REPORT_TIMEOUT_S)
    end_peers(rank, JOIN_TIMEOUT_S)
    return reports


def first_failure(reports: list[dict[str, Any] | None], peers: list[Any], own: str
                  ) -> tuple[str, str, dict[str, Any] | None] | None:
    """(classification, owner, exception) of the first rank that failed on its own, when rank 0's own
    end (`own`) is not the cause: rank 0 failing because another rank went away (a collective broke,
    the watch fired) is not; None when rank 0's classification stands."""
    if own not in ("normal_completion", "learner_failure", "unknown_failure"):
        return None
    for r, (report, proc) in enumerate(zip(reports, peers, strict=True), start=1):
        if report is None:
            exception = {"type": "RankDied", "message": f"rank {r} exited without a report (code {proc.exitcode})"}
            failure = ("learner_failure", f"rank {r} learner", exception)
        else:
            shutdown = report["shutdown"]
            if shutdown["classification"] in ("normal_completion", "external_cancellation"):
                continue
            failure = (shutdown["classification"], f"rank {r} {shutdown['owner']}", shutdown["exception"])
        classification, owner, exception = failure
        print(f"train: error: {classification}: {owner}: {exception['type'] if exception else ''}: "
              f"{exception['message'] if exception else ''}", file=sys.stderr, flush=True)
        return failure
    return None
