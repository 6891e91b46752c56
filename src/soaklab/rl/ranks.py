"""Data-parallel ranks as processes (docs/runtime.md, "Data parallelism").

The trainer is rank 0. It spawns ranks 1..N-1 itself with torch.multiprocessing (spawn), not
through `torchrun`: the soak monitor, the DAG and a user all start one `soaklab train` and watch
one process tree, and rank 0 holds what a single-rank run holds (terminal, TensorBoard,
checkpoints, run_summary.json), so one command serves one GPU and several alike.

Each rank sees one GPU (CUDA_VISIBLE_DEVICES narrowed to its own entry before CUDA starts, so it
is `cuda:0` there), is confined to its CPU slice, and runs a whole learner with its own collector.
A rank that ends early ends the run: rank 0 watches its ranks' processes, every other rank
watches rank 0 and the shared stop flag; the watch aborts the process group so no rank waits out
a collective's timeout on a peer that is gone.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch.multiprocessing as mp

from soaklab.contract.contract import MAX_SEED
from soaklab.contract.sections import RunConfig
from soaklab.host.lifetime import end_process

if TYPE_CHECKING:
    from soaklab.config.run_config import ResolvedRun
    from soaklab.rl.dp import DataParallel

VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"
WATCH_EVERY_S = 0.2
STUCK_GRACE_S = 3.0  # from a peer's end to ending a learner that has not noticed it


def rank_run(run: RunConfig, rank: int, groups: int) -> RunConfig:
    """Rank r's seeds: algo.seed + r (exploration, replay sampling) and env.seed + r * groups (its
    envs' streams do not overlap another rank's groups). The model itself is rank 0's (broadcast)."""
    if rank == 0:
        return run
    return replace(run, algo=replace(run.algo, seed=(run.algo.seed + rank) % (MAX_SEED + 1)),
                   env=replace(run.env, seed=(run.env.seed + rank * groups) % (MAX_SEED + 1)))


@dataclass
class RankContext:
    """This process's rank, and what it needs to notice the others."""

    rank: int
    world_size: int
    backend: str
    cpu_ids: tuple[int, ...] | None
    stop: Any  # multiprocessing Event: rank 0 sets it when the run ends early
    parent_pid: int | None = None  # rank > 0: rank 0's pid
    report: Connection | None = None  # rank > 0: its final report goes to rank 0
    peers: list[BaseProcess] = field(default_factory=list)  # rank 0: ranks 1..N-1
    peer_reports: list[Connection] = field(default_factory=list)  # rank 0: one pipe per peer

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def gone(self) -> str | None:
        """Why this rank should stop now, or None: a peer exited (rank 0), or rank 0 did or asked to."""
        if self.is_main:
            for r, proc in enumerate(self.peers, start=1):
                if not proc.is_alive():
                    return f"rank {r} exited (code {proc.exitcode})"
            return None
        if os.getppid() != self.parent_pid:
            return "rank 0 exited"
        if self.stop.is_set():
            return "rank 0 ended the run"
        return None


class RankGone(Exception):  # noqa: N818 - a condition, named for what happened
    """Another rank ended (or asked this one to end) before the run finished."""


class RankWatch:
    """Polls `RankContext.gone` from a thread; on the first reason, aborts the process group (a
    NCCL collective waiting on the gone peer fails at once) and keeps the reason for the learner,
    which raises it at its next iteration. A learner still stuck STUCK_GRACE_S later (a gloo
    collective whose peer is still alive, waiting for this rank, does not fail) is ended from
    here: `on_stuck` runs the learner's shutdown on this thread and exits the process."""

    def __init__(self, ctx: RankContext, dp: DataParallel, on_stuck: Callable[[str], None]) -> None:
        self.ctx, self.dp, self.on_stuck = ctx, dp, on_stuck
        self.reason: str | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"soaklab-rank{ctx.rank}-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(WATCH_EVERY_S):
            reason = self.ctx.gone()
            if reason is not None:
                self.reason = reason
                if self.dp.backend == "nccl":
                    self.dp.abort()
                if not self._done.wait(STUCK_GRACE_S):
                    self.on_stuck(reason)
                return

    def check(self) -> None:
        if self.reason is not None:
            raise RankGone(self.reason)

    def close(self) -> None:
        self._done.set()
        if threading.current_thread() is not self._thread:
            self._thread.join()


def visible_entries(world_size: int) -> list[str]:
    """One CUDA_VISIBLE_DEVICES entry per rank: the parent's list (opaque: indices, UUIDs, MIG
    names alike), or 0..N-1 where it is unset."""
    text = os.environ.get(VISIBLE_ENV)
    entries = [e.strip() for e in text.split(",") if e.strip()] if text else [str(i) for i in range(world_size)]
    return entries[:world_size]


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """os.environ with `values` while a child is started (spawn children copy it)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def confine(ctx: RankContext) -> None:
    """This process (and the collector it spawns, and their threads) on the rank's CPU slice."""
    if ctx.cpu_ids is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, ctx.cpu_ids)


def start_ranks(resolved: ResolvedRun, run_dir: Path, target: Callable[[ResolvedRun, Path, RankContext], None]
                ) -> RankContext:
    """Rank 0's side: spawn ranks 1..N-1, each running `target` (soaklab.rl.train.rank_main: a learner;
    passed in, so this module never imports the learner), then narrow this process to its own GPU
    and cores."""
    plan = resolved.ranks
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    cpu_ids = plan.collector_cpu_ids or (None,) * plan.world_size
    entries = visible_entries(plan.world_size) if plan.backend == "nccl" else []
    main = RankContext(0, plan.world_size, str(plan.backend), cpu_ids[0], stop)
    for r in range(1, plan.world_size):
        receive, send = ctx.Pipe(duplex=False)
        child = RankContext(r, plan.world_size, str(plan.backend), cpu_ids[r], stop, os.getpid(), send)
        with environment({VISIBLE_ENV: entries[r]} if entries else {}):
            proc = ctx.Process(target=target, args=(resolved, run_dir, child), name=f"soaklab-rank{r}",
                               daemon=False)
            proc.start()
        send.close()  # rank 0 keeps the receiving end only: the pipe then reports the child's exit
        main.peers.append(proc)
        main.peer_reports.append(receive)
    if entries:  # CUDA is not initialised in this process yet: cuda:0 is now rank 0's own GPU
        os.environ[VISIBLE_ENV] = entries[0]
    confine(main)
    return main


def collect_reports(ctx: RankContext, timeout_s: float) -> list[dict[str, Any] | None]:
    """Each peer's final report (None where a rank died without one), after its process ended."""
    import time

    reports: list[dict[str, Any] | None] = []
    deadline = time.monotonic() + timeout_s
    for proc, pipe in zip(ctx.peers, ctx.peer_reports, strict=True):
        report = None
        try:
            if pipe.poll(max(deadline - time.monotonic(), 0.0)):
                report = pipe.recv()
        except (EOFError, OSError):  # the rank died without reporting
            report = None
        pipe.close()
        proc.join(max(deadline - time.monotonic(), 0.1))
        reports.append(report)
    return reports


def end_peers(ctx: RankContext, join_timeout_s: float) -> None:
    """Make sure no rank outlives rank 0: ask, then terminate, then kill."""
    for proc in ctx.peers:
        end_process(proc, join_timeout_s)
