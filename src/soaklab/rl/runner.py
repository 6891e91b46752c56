"""The learner: owns actor, critics, replay ring, inference and logging (docs/runtime.md).

`train(resolved, run_dir)` runs one training to completion or failure and
always ends the same way: stop the collector (signal, join, terminate), close
the replay pipeline, snapshot counters, write the final checkpoint, close the
logger, write run_summary.json. Cleanup errors are recorded, never raised over
the original error.

With data parallelism (soaklab.rl.ranks) every rank runs a Learner; rank 0 alone
logs, checkpoints and writes the summary, the others report their end to it.
"""

from __future__ import annotations

import gc
import io
import multiprocessing as mp
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from soaklab.config.run_config import ResolvedRun
from soaklab.contract.contract import MAX_SEED
from soaklab.contract.sections import RunConfig
from soaklab.files.checkpoints import collector_path, learner_path
from soaklab.files.jsonfiles import write_json_atomic
from soaklab.host.info import usable_cores
from soaklab.host.lifetime import leave
from soaklab.metrics.tags import ITERATION_TAG, SUMMED_OVER_RANKS, diagnostic_tag
from soaklab.rl.agents import make_agent
from soaklab.rl.cancel import Cancellation, Cancelled
from soaklab.rl.channels import C, PeerDied, make_channels, wait
from soaklab.rl.collector import CollectorSpec
from soaklab.rl.collector_process import (
    NO_COLLECTOR,
    CollectorProcess,
    diagnostics_path,
    non_finite_path,
    read_backend_diagnostics,
    stop_collector,
)
from soaklab.rl.diverged import CLASSIFICATION as CLASSIFICATION_DIVERGED
from soaklab.rl.diverged import UNSTABLE_TAG, Diverged, DivergenceWatch
from soaklab.rl.dp import RendezvousAborted
from soaklab.rl.faults import Fault, fault_from_env
from soaklab.rl.finite import CLASSIFICATION as CLASSIFICATION_NON_FINITE
from soaklab.rl.finite import FiniteWatch, NonFinite
from soaklab.rl.logging import DeviceLog, EpisodeStats, RunLogger, SilentLogger
from soaklab.rl.rank_group import RankGroup, collect_peers, first_failure
from soaklab.rl.ranks import RankContext, RankGone
from soaklab.rl.replay import ReplayRing
from soaklab.rl.resume import (
    Checkpoint,
    end_segment,
    host_rng_state,
    load_tensor_state,
    prune,
    save_atomic,
    set_host_rng_state,
    tensor_state,
)
from soaklab.rl.run_summary import LearnerOutcome, build_rank_report, build_summary, validate_summary
from soaklab.rl.schedule import UPDATE_LAG_VECTORS, UpdateSchedule
from soaklab.rl.shm import reclaim_at_start
from soaklab.rl.timing import PhaseTimer
from soaklab.rl.transport import CudaRing, HostRing, make_cuda_ring, make_transport
from soaklab.rl.wandb_sink import WandbSink


@dataclass
class Shutdown:
    classification: str = "unknown_failure"
    owner: str = "learner"
    phase: str = "startup"
    iteration: int = 0
    exception: dict[str, str] | None = None
    collector: dict[str, Any] = field(default_factory=lambda: {"pid": None, "alive": False, "exitcode": None,
                                                                "signal": None})
    cleanup_errors: list[str] = field(default_factory=list)
    cancellation: dict[str, str | None] | None = None  # the signal, and whether a safe point noticed it
    stop_reason: str | None = None  # a completed run: max_iterations or time_budget

    def record(self) -> dict[str, Any]:
        return {"classification": self.classification, "stop_reason": self.stop_reason, "owner": self.owner,
                "phase": self.phase,
                "iteration": self.iteration, "exception": self.exception, "collector": self.collector,
                "cleanup": {"errors": list(self.cleanup_errors)}, "cancellation": self.cancellation}


def rank_run(run: RunConfig, rank: int, groups: int) -> RunConfig:
    """Rank r's seeds: algo.seed + r (exploration, replay sampling) and env.seed + r * groups (its
    envs' streams do not overlap another rank's groups). The model itself is rank 0's (broadcast)."""
    if rank == 0:
        return run
    return replace(run, algo=replace(run.algo, seed=(run.algo.seed + rank) % (MAX_SEED + 1)),
                   env=replace(run.env, seed=(run.env.seed + rank * groups) % (MAX_SEED + 1)))


def seed_everything(seed: int) -> None:
    """algo.seed seeds the global Python and torch RNGs (not numpy's, per the seed contract)."""
    random.seed(seed)
    torch.manual_seed(seed)


def leak_child() -> None:
    """Fault hook: leave a detached child behind, as a buggy runtime would."""
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# Attributes of an agent that are wiring, not training state (the replay is saved on its own).
AGENT_NOT_STATE = frozenset({"replay", "dp", "compilation"})


class Learner:
    """`hold_updates` (benchmarks only): always answer with the policy, never update."""

    def __init__(self, resolved: ResolvedRun, run_dir: Path, hold_updates: bool = False,
                 rank: RankContext | None = None, resume: Checkpoint | None = None) -> None:
        self.hold_updates = hold_updates
        self.resume = resume  # the checkpoint this run continues from (soaklab.rl.resume)
        self.resolved = resolved
        self.rank = rank
        self.rank_index = rank.rank if rank is not None else 0
        self.is_main = self.rank_index == 0
        self.world_size = rank.world_size if rank is not None else 1
        self.cfg = rank_run(resolved.run, self.rank_index, len(resolved.layout.group_bounds))
        self.run_dir = run_dir
        self.settings = resolved.settings
        self.device = torch.device(resolved.devices.learner)
        fault = fault_from_env()
        self.fault: Fault | None = fault if fault is not None and fault.rank == self.rank_index else None
        self.group: RankGroup | None = None  # the data-parallel group, once joined
        self.peer_reports: list[dict[str, Any] | None] | None = None  # how ranks 1..N-1 ended (rank 0)
        self.shutting_down = False
        algo = self.cfg.algo
        self.max_iterations = algo.max_iterations
        self.save_interval = algo.save_interval
        self.shutdown = Shutdown()
        self.cancellation = Cancellation()
        self.iteration = 0
        self.start_iteration = resume.iteration if resume is not None else 0
        self.update_count = 0
        self.env_steps = 0
        # A data-parallel run would need every rank's checkpoint, taken at one iteration and resumed
        # together (docs/runtime.md, "Resuming a run"): one process is resumable, on either backend.
        self.segments: list[dict[str, Any]] | None = None  # read back at shutdown (rank 0)
        self.resumable = self.world_size == 1
        self.resume_record: dict[str, Any] = {
            "resumable": self.resumable, "resumed_from": self.start_iteration if resume is not None else None,
            "checkpoints_written": 0, "last_iteration": None}
        self.start_time = time.monotonic()
        # training.max_wall_minutes counts the wall time of the iterations the run holds: a resumed
        # run's earlier segments up to its checkpoint, then this process from its start.
        budget = self.cfg.training.max_wall_minutes
        self.budget_s = None if budget is None else budget * 60.0
        self.elapsed_before = float(resume.learner.get("elapsed_s", 0.0)) if resume is not None else 0.0
        self.collector: CollectorProcess | None = None
        self.diagnostics_path = diagnostics_path(run_dir, self.rank_index)
        self.non_finite_path = non_finite_path(run_dir, self.rank_index)
        self.non_finite_path.unlink(missing_ok=True)  # only this run's collector may report one
        self.watch = FiniteWatch(self.device)
        self.arrays = None
        self.handles = None
        self.logger: RunLogger | SilentLogger | None = None
        self.agent = None
        self.final_fps = 0.0
        self.backend_diagnostics: dict[str, Any] | None = None
        self.learner_diagnostics: dict[str, Any] | None = None
        self.summary_error: str | None = None  # why run_summary.json could not be written, if it could not
        self.transport: HostRing | CudaRing | None = None
        self.cuda_process_sharing: dict[str, Any] | None = None
        self.device_log: DeviceLog | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        self.cancellation.install()
        try:
            self.shutdown.stop_reason = self._run()
            self.shutdown.classification = "normal_completion"
            self.shutdown.phase = "complete"
        except NonFinite as exc:
            self._failed(CLASSIFICATION_NON_FINITE, "learner", exc)
        except Diverged as exc:
            self._failed(CLASSIFICATION_DIVERGED, "learner", exc)
        except Cancelled as exc:
            self._failed("external_cancellation", "learner", exc)
        except PeerDied as exc:
            self._failed("collector_failure", "collector", exc)
        except (RankGone, RendezvousAborted) as exc:  # rank 0 adopts the rank's own classification once it has reported
            self._failed("external_cancellation" if not self.is_main else "unknown_failure", "rank", exc)
        except Exception as exc:
            self._failed("learner_failure", "learner", exc)
        finally:
            self.cancellation.ignore()  # shutdown must not be interrupted by a second signal
            summary = self._shutdown()
            self.cancellation.restore()
        return summary

    def _failed(self, classification: str, owner: str, exc: BaseException) -> None:
        if classification == "learner_failure" and self.collector is not None and not self.collector.alive():
            classification, owner = "collector_failure", "collector"
        if classification != "external_cancellation":
            found = self._first_non_finite()
            if found is not None:  # what failed next (a collector gone, an index out of range) is its consequence
                classification, owner, exc = CLASSIFICATION_NON_FINITE, found[0], found[1]
        self.shutdown.classification = classification
        self.shutdown.owner = owner
        self.shutdown.exception = {"type": type(exc).__name__, "message": str(exc) or repr(exc)}
        who = f"rank {self.rank_index} " if self.world_size > 1 else ""
        print(f"train: {who}error: {classification}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)

    def _first_non_finite(self) -> tuple[str, NonFinite] | None:
        """The earliest non-finite value the collector reported or this learner's pending flags hold."""
        found: list[tuple[str, NonFinite]] = []
        collector = NonFinite.read(self.non_finite_path)
        if collector is not None:
            found.append(("collector", collector))
        try:
            self.watch.drain()
        except NonFinite as exc:
            found.append(("learner", exc))
        except Exception:  # a device that failed cannot be read; the failure stands as it is
            pass
        return min(found, key=lambda f: f[1].iteration) if found else None

    def outcome(self) -> LearnerOutcome:
        """How this rank's run stands now, as values (what rl.summary reads)."""
        return LearnerOutcome(
            resolved=self.resolved, rank_index=self.rank_index, parallel=self.rank is not None, device=self.device,
            shutdown=self.shutdown.record(), iteration=self.iteration, env_steps=self.env_steps,
            final_fps=self.final_fps, wall_time_s=time.monotonic() - self.start_time,
            backend_diagnostics=self.backend_diagnostics, learner_diagnostics=self.learner_diagnostics,
            cuda_process_sharing=self.cuda_process_sharing,
            rank_records=self.group.records if self.group is not None else None,
            peer_reports=self.peer_reports,
            dp_warmed_up=bool(self.group is not None and self.group.dp.warmed_up),
            segments=self.segments, loggers=self.logger.states() if self.logger is not None else None)

    def elapsed_s(self) -> float:
        """The run's training wall time so far (what training.max_wall_minutes bounds)."""
        return self.elapsed_before + time.monotonic() - self.start_time

    def _budget_spent(self) -> bool:
        return self.budget_s is not None and self.elapsed_s() >= self.budget_s

    def _run(self) -> str:
        """Train; why the run stopped (max_iterations or time_budget)."""
        seed_everything(self.cfg.algo.seed)
        # Intra-op threads are fixed by config (env.num_threads, default all cores): learner and
        # collector take turns on the same cores in lock-step, and a fixed count keeps CPU runs
        # bitwise reproducible.
        torch.set_num_threads(self.cfg.env.num_threads or usable_cores())
        spaces = self.resolved.spaces
        s = self.settings
        layout = self.layout = self.resolved.layout
        ctx = mp.get_context("spawn")
        carrier = self.resolved.devices.carrier
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        if self.rank is not None:
            self.shutdown.phase = "rendezvous"
            self.group = RankGroup.join(self.rank, self.run_dir, self.device, carrier, self._stuck)
        # A cuda carrier: the learner allocates the ring and ingress slots on the GPU and shares them.
        cuda_ring = make_cuda_ring(layout, carrier) if carrier.startswith("cuda") else None
        if line := reclaim_at_start():  # a tree killed whole left its segments: not for good
            print(f"train: {line}", flush=True)
        self.arrays, self.handles = make_channels(ctx, layout, cuda_ring)
        self.transport = make_transport(cuda_ring if cuda_ring is not None else self.arrays)
        record = self.resolved.record()
        self.config_hash = record["config_hash"]  # every checkpoint names its run's configuration
        # Rank 0 alone writes the terminal, TensorBoard and progress.json.
        self.logger = (RunLogger(self.run_dir, self.max_iterations,
                                 {"config_hash": record["config_hash"], "run_dir": str(self.run_dir)}, record,
                                 resuming=self.resume is not None, wandb=self._wandb_sink(record),
                                 kill_midway_carry=self._due("kill_carry"))
                       if self.is_main else SilentLogger())
        self.agent = make_agent(self.resolved.composed.algo, spaces.actor_obs, spaces.critic_obs, spaces.action,
                                self.cfg.algo.num_envs, self.cfg.algo, self.device)
        if self.group is not None:
            self.agent.join(self.group.dp)
        algo = self.cfg.algo
        self.replay = ReplayRing(algo.replay_buffer_size, layout.row_width, layout.row_slices(), self.device,
                                 seed=(algo.seed + 1) % (MAX_SEED + 1), stride=self.cfg.algo.num_envs,
                                 n_step=algo.n_step, gamma=algo.gamma)
        self.timer = PhaseTimer(self.device)
        self.cuda_process_sharing = self._process_sharing_evidence()
        self.stats = EpisodeStats(self.cfg.algo.num_envs)
        self.divergence = DivergenceWatch(self.cfg.algo.num_envs)
        if self.resume is not None:
            self._restore(self.resume)
        # Read once: ResolvedRun derives them from its config (a copy), and every iteration logs them.
        self.metric_names = self.resolved.collector_metrics
        spec = CollectorSpec(
            handles=self.handles, task=self.resolved.composed.task, run=self.cfg,
            scene=self.resolved.scene, vector_steps=self.max_iterations,
            metrics_interval=s.collector_metrics_interval, metric_names=self.metric_names,
            torch_threads=1, parent_pid=os.getpid(), fault=self.fault,
            diagnostics_path=str(self.diagnostics_path),
            non_finite_path=str(self.non_finite_path),
            run_dir=str(self.run_dir) if self.resumable else None, save_interval=self.save_interval,
            resume_from=str(self.resume.collector) if self.resume is not None else None,
        )
        self.shutdown.phase = "spawn"
        self.collector = CollectorProcess(ctx, spec)
        self.collector.start(self.resolved.mps)
        # Nothing is written meanwhile: progress.json appears only once the training loop can run, so
        # a watcher tells start-up (no progress.json yet) from training (progress.json rewritten).
        self.collector.wait_ready(self.arrays["control"], self._alive, self._check_ranks)
        self.logger.progress(self.start_iteration, self.env_steps * self.world_size, force=True)
        self.shutdown.phase = "training"
        return self._loop()

    def _stuck(self, reason: str) -> None:
        """The watch thread's last resort: the training thread has not noticed the other ranks' end
        (it waits in a collective that cannot fail), so shut this rank down from here and exit."""
        if self.shutting_down:
            return
        self._failed("external_cancellation" if not self.is_main else "unknown_failure", "rank", RankGone(reason))
        result = self._shutdown()
        if self.is_main:
            print(f"train: failed ({result['runtime_manifest']['shutdown']['classification']}) after "
                  f"{self.iteration} iterations; {self.run_dir / 'run_summary.json'}", file=sys.stderr, flush=True)
        elif self.rank is not None and self.rank.report is not None:
            self.rank.report.send(result)
        leave(1)

    def _process_sharing_evidence(self) -> dict[str, Any] | None:
        """With mps requested, prove (now that the learner's CUDA context exists) that it runs through the
        selected daemon, before the collector is spawned; a CUDA run without it records what it saw."""
        from soaklab.mps.client import ambient_evidence, sharing_evidence

        devices = self.resolved.devices
        if self.resolved.mps is not None:
            return sharing_evidence(self.resolved.mps, devices.learner, devices.carrier)
        if self.device.type == "cuda":
            return ambient_evidence(devices.learner, devices.carrier)
        return None

    def _alive(self) -> bool:
        """Polled by every wait on the collector: also the learner's safe point for a cancellation."""
        self.cancellation.check()
        return self.collector is not None and self.collector.alive()

    def _check_ranks(self) -> None:
        if self.group is not None:
            self.group.check()

    # -- the training loop -------------------------------------------------------------------------
    def _loop(self) -> str:
        """One iteration: answer vector step `it`'s observations, run update round `it`, take in the
        transitions of vector step `it`.

        The schedule is fixed: update round `it` trains on the transitions up to vector step `it - 1`
        (a lag of one), so it runs while the collector steps the envs with the actions just answered
        (on a GPU the two processes' kernels overlap; on a CPU the two processes' threads do). The
        replay contents each round sees are the same in every run, so CPU runs with the same seeds
        are bitwise reproducible."""
        ctl, layout, h, transport = self.arrays["control"], self.layout, self.handles, self.transport
        ingress_rows = self.arrays["ingress_rows"]
        slices = layout.row_slices()
        chunks = layout.chunks_per_vector
        vector = torch.zeros(layout.num_envs, layout.row_width, device=self.device)
        schedule = UpdateSchedule.of(self.cfg.algo.learning_starts, self.cfg.algo.updates_per_step,
                                     self.replay.n_step, self.agent.warmup_actions, self.hold_updates)
        self.agent.bind(self.replay, self.cfg.algo.batch_size)
        self.device_log = DeviceLog(self.settings.collector_metrics_interval, layout.num_envs,
                                    self.agent.diag_names, self.device)
        self.diag_checked = tuple((f"loss/{name}", None) for name in self.agent.diag_names)
        last_counters = ctl.copy()
        mark = time.perf_counter()
        if self.resumable:
            self.cancellation.defer()  # a signal finishes the iteration and checkpoints (soaklab.rl.cancel)
        signalled = False
        for it in range(self.start_iteration, self.max_iterations):
            self.iteration = it
            self.cancellation.check()
            if self.resumable and self.cancellation.finish_first():
                signalled = True
                ctl[C.SAVE_AT] = it + 1  # before this step's answers: the collector saves after stepping it
            self._check_ranks()
            self._fault_hooks(it)
            # Inference: answer each group's observations with the current policy.
            for g, (a, b) in enumerate(layout.group_bounds):
                wait(h.obs_ready[g], ctl, self._alive, stop_aware=False)
                obs = transport.obs(g, b - a, self.device)  # on CUDA: the stream waits for the collector
                with self.timer.span("inference"):
                    if schedule.random_actions(it):
                        actions = self.agent.random_actions(b - a)
                    else:
                        actions = self.agent.act(obs, slice(a, b), explore=True)
                    transport.answer(g, actions)
                ctl[C.TICKS_ANSWERED] += 1
                h.act_ready[g].release()
            # Update round `it` (transitions up to vector step it - 1), while the envs step.
            updates = schedule.updates(it)
            updated = updates > 0
            update_rows = self.replay.size if updated else 0  # what this round samples from
            if updated:
                transport.join()  # the last vector's ingress and reward statistics, before the update reads them
                with self.timer.span("update"):
                    for _ in range(updates):
                        self.agent.update(self.update_count)
                        self.update_count += 1
                self.watch.flags(it, self.diag_checked, self.agent.non_finite_diagnostics())
            # Replay ingress: copy this vector step's chunks into the replay ring, release each slot.
            target, filled = (it + 1 - self.start_iteration) * chunks, 0  # the control block counts from this start
            with transport.ingesting():
                while ctl[C.INGRESS_RELEASED] < target:
                    wait(h.ingress_filled, ctl, self._alive, stop_aware=False)
                    slot = int(ctl[C.INGRESS_RELEASED] % layout.depth)
                    n = int(ingress_rows[slot])
                    rows = transport.chunk(slot, n, self.device)  # on CUDA: the side stream waits for it
                    with self.timer.span("ingress"):
                        self.replay.add(rows)
                        vector[filled:filled + n] = rows
                        transport.release_chunk(slot)
                    filled += n
                    ctl[C.INGRESS_RELEASED] += 1
                    h.ingress_free.release()
                # What reads the vector stays on the ingress stream (on CUDA): the next inference
                # does not wait for it, the next update does (transport.join).
                rewards = vector[:, slices["reward"]][:, 0]
                # The collector checked them; on a GPU its flags are read only at its next metric
                # publication, and an update may fail on them first (this flag names the cause then).
                self.watch.check(it, {"reward": rewards})
                dones = (vector[:, slices["terminated"]][:, 0] + vector[:, slices["truncated"]][:, 0]) > 0
                self.agent.observe_rewards(rewards, dones)
                self.env_steps += layout.num_envs
                # One loop period, from the same point of the previous iteration: logging and
                # checkpoints are part of what an iteration costs.
                now = time.perf_counter()
                iteration_s, mark = now - mark, now
                self.final_fps = layout.num_envs / max(iteration_s, 1e-9)
                values = self._host_scalars(iteration_s, self.timer.take(), ctl, last_counters)
                values["Replay/update_rows"] = float(update_rows)
                self.device_log.record(it, rewards, dones, self.agent.diagnostics, updated, values)
            # The budget ends the run after a whole iteration: its rows logged, then the final
            # checkpoint (at shutdown) holds everything it trained on.
            last = it + 1 == self.max_iterations or self._budget_spent() or signalled
            if self.device_log.full or last:
                self._flush_log()
            self.logger.progress(it + 1, self.env_steps * self.world_size)
            last_counters = ctl.copy()
            self.iteration = it + 1
            if (it + 1) % self.save_interval == 0:
                self._checkpoint(f"model_{it + 1}.pt")
                if self.resumable and not last:
                    self._save_resume(it + 1)
            if signalled and it + 1 < self.max_iterations:
                self._save_resume(it + 1)
                self.cancellation.end(checkpoint=it + 1)
            if last:
                break
        transport.join()
        self.watch.drain()  # a GPU's last flags: a run that ends non-finite never ends completed
        self.logger.progress(self.iteration, self.env_steps * self.world_size, force=True)
        self.logger.terminal(self.iteration, self.final_fps * self.world_size, self.stats.mean_return,
                             self.stats.mean_length, force=True)
        if self.iteration < self.max_iterations:
            print(f"train: time budget of {self.cfg.training.max_wall_minutes:g} min spent at iteration "
                  f"{self.iteration} of {self.max_iterations}", flush=True)
            return "time_budget"
        return "max_iterations"

    def _flush_log(self, across_ranks: bool = True) -> None:
        """Write the buffered iterations to TensorBoard (one device read for all of them). With
        several ranks, each iteration's scalars are first combined over the ranks in one collective
        (every rank flushes at the same iterations); a failed run's last rows stay rank 0's own."""
        self._join_ingress()  # the device rows were written on the ingress stream
        if not self.shutting_down:  # a failure already drained them (_first_non_finite); a cancellation stands
            self.watch.drain()  # with the rows: one device read more per flush, none per step
        rows = self.device_log.drain(self.stats)
        if self.group is not None and across_ranks and rows:
            keys = sorted(set().union(*(values for _, _, values in rows))
                          | {diagnostic_tag(name) for name in self.agent.diag_names})
            merged = self.group.dp.reduce_rows([values for _, _, values in rows], keys, SUMMED_OVER_RANKS, self.device)
            rows = [(it, walltime, values) for (it, walltime, _), values in zip(rows, merged, strict=True)]
        for it, walltime, values in rows:
            self.logger.scalars(values, it, walltime)
        if not self.shutting_down:  # on the rows just written, so the event file holds what it names
            for it, _, values in rows:
                self.divergence.observe(it, values)
            if rows:
                self.divergence.check_episodes(rows[-1][0], self.stats.finished_lengths,
                                               self.stats.finished_lengths.maxlen or 0)
        if rows:  # the rate over the flushed iterations: one iteration's rate swings with the flush itself
            seconds = sum(values[ITERATION_TAG] or 0.0 for _, _, values in rows) / 1e3
            fps = self.layout.num_envs * self.world_size * len(rows) / max(seconds, 1e-9)
            self.logger.terminal(rows[-1][0] + 1, fps, self.stats.mean_return, self.stats.mean_length)

    def _host_scalars(self, iteration_s: float, phases_ms: dict[str, float], ctl: np.ndarray,
                      last: np.ndarray) -> dict[str, float | None]:
        """The iteration's scalars known on the host. Phase times are GPU time on a CUDA learner,
        read when finished (so possibly an iteration late)."""
        def delta_ms(index: C) -> float:
            return float(ctl[index] - last[index]) / 1e6

        metrics = self.arrays["metrics"]
        values: dict[str, float | None] = {
            ITERATION_TAG: iteration_s * 1e3,
            "Perf/total_fps": self.final_fps,
            "Perf/learner_inference_ms": phases_ms.get("inference", 0.0),
            "Perf/learner_ingress_ms": phases_ms.get("ingress", 0.0),
            "Perf/learner_update_ms": phases_ms.get("update", 0.0),
            "Perf/collector_env_step_ms": delta_ms(C.ENV_STEP_NS),
            "Perf/collector_action_wait_ms": delta_ms(C.ACTION_WAIT_NS),
            "Perf/collector_ingress_write_ms": delta_ms(C.INGRESS_WRITE_NS),
            "Replay/size": float(self.replay.size),
            "Ingress/occupancy": float(ctl[C.INGRESS_PUBLISHED] - ctl[C.INGRESS_RELEASED]),
            "Ingress/high_water_occupancy": float(ctl[C.HIGH_WATER]),
            "Ingress/backpressure_waits": float(ctl[C.BACKPRESSURE_WAITS]),
            UNSTABLE_TAG: float(ctl[C.PHYSICS_UNSTABLE] - last[C.PHYSICS_UNSTABLE]),
        }
        names = self.metric_names
        for i, name in enumerate(names):
            values[f"Train/{name}"] = float(metrics[i])
        # Of the episodes that ended: the share that ran to the time limit or the clip's end.
        ended = float(metrics[names.index("episodes/terminated")] + metrics[names.index("episodes/truncated")])
        values["Train/timeout_fraction"] = (float(metrics[names.index("episodes/truncated")]) / ended
                                            if ended > 0 else None)
        return values

    def _due(self, name: str) -> bool:
        """A resume's kill test hook (SOAKLAB_FAULT=<name>@<the iteration it resumes at>)."""
        return self.resume is not None and self.fault is not None and self.fault.due(name, self.start_iteration)

    def _fault_hooks(self, it: int) -> None:
        fault = self.fault
        if fault is None:
            return
        if fault.due("raise_learner", it):
            raise RuntimeError(f"injected learner fault at iteration {it}")
        if fault.due("hang_learner", it):
            while True:  # no progress is written from here on: the monitor must notice
                time.sleep(1.0)
        if fault.due("leak_child", it):
            leak_child()
        if fault.due("kill_learner", it):  # no shutdown at all: what a resume must recover from
            os.kill(os.getpid(), signal.SIGKILL)
        if fault.due("sigterm_learner", it):  # a real SIGTERM, as a scheduler's preemption sends one
            os.kill(os.getpid(), signal.SIGTERM)

    def _checkpoint(self, name: str) -> None:
        if not self.is_main:  # every rank holds the same model: rank 0's checkpoint is the run's
            return
        self._join_ingress()  # the reward statistics are updated on the ingress stream
        path = self.run_dir / "checkpoints" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {"iteration": self.iteration, "env_steps": self.env_steps, "config_hash": self.config_hash,
                   "agent": self.agent.state_dict()}
        tmp = path.with_suffix(".pt.tmp")
        # Serialised in memory, written by Python: a full disk is then an OSError naming ENOSPC, not
        # the "basic_ios::clear" torch's own file writer reports.
        buffer = io.BytesIO()
        torch.save(payload, buffer)
        try:
            tmp.write_bytes(buffer.getbuffer())
            tmp.replace(path)
        except BaseException:  # a full disk leaves no partial checkpoint behind
            tmp.unlink(missing_ok=True)
            raise

    def _save_resume(self, k: int) -> None:
        """The learner's half of resumable checkpoint k (soaklab.rl.resume), after the collector's:
        the event rows up to iteration k - 1 on disk first, so a resume never has a gap."""
        t0 = time.perf_counter()
        self._flush_log()
        self.logger.sync()
        replay = self.replay
        rows = replay.storage if replay.size == replay.capacity else replay.storage[: replay.size]
        payload = {
            "iteration": k, "env_steps": self.env_steps, "config_hash": self.config_hash,
            "update_count": self.update_count, "exact": True,
            "agent": tensor_state(self.agent, skip=AGENT_NOT_STATE),
            "replay": {"rows": rows.detach().clone(), "ptr": replay.ptr, "size": replay.size,
                       "generator": replay.generator.get_state()},
            "stats": self.stats.state_dict(), "metrics": torch.from_numpy(self.arrays["metrics"].copy()),
            "host_rng": host_rng_state(), "collector": collector_path(self.run_dir, k).name,
            "elapsed_s": self.elapsed_s(),
        }
        learner_bytes = save_atomic(payload, learner_path(self.run_dir, k))
        collector_bytes = collector_path(self.run_dir, k).stat().st_size
        prune(self.run_dir)
        # What a checkpoint costs: the learner's side in time (the collector's is in its env step).
        self.resume_record.update(checkpoints_written=self.resume_record["checkpoints_written"] + 1, last_iteration=k,
                                  last_learner_bytes=learner_bytes, last_collector_bytes=collector_bytes,
                                  last_learner_seconds=round(time.perf_counter() - t0, 4))

    def _restore(self, checkpoint: Checkpoint) -> None:
        """Everything _save_resume wrote, before the collector is spawned and the agent is bound."""
        state = checkpoint.learner
        load_tensor_state(self.agent, state["agent"])
        if self._due("kill_checkpoint_load"):  # the agent restored, the rest not yet
            os.kill(os.getpid(), signal.SIGKILL)
        replay, saved = self.replay, state["replay"]
        replay.storage[: saved["rows"].shape[0]].copy_(saved["rows"])
        replay.ptr, replay.size = int(saved["ptr"]), int(saved["size"])
        replay.size_t.fill_(replay.size)
        replay.ptr_t.fill_(replay.ptr)
        replay.generator.set_state(saved["generator"])
        self.stats.load_state_dict(state["stats"])
        self.arrays["metrics"][:] = state["metrics"].numpy()
        self.env_steps, self.update_count = int(state["env_steps"]), int(state["update_count"])
        set_host_rng_state(state["host_rng"])

    def _join_ingress(self) -> None:
        if self.transport is not None:  # closed at shutdown: the device was synchronised then
            self.transport.join()

    # -- shutdown ----------------------------------------------------------------------------------
    def _step(self, what: str, fn: Any) -> Any:
        try:
            return fn()
        except BaseException as exc:  # recorded, never raised over the original error
            self.shutdown.cleanup_errors.append(f"{what}: {type(exc).__name__}: {exc}")
            return None

    def _stop_collector(self) -> None:
        control = self.arrays["control"] if self.arrays is not None and self.arrays.arrays else None
        stop_collector(control, self.handles, self.collector)

    def _close_transport(self) -> None:
        """The collector is gone: drop the learner's references to the CUDA ring too, so CUDA IPC
        can account every shared block as released before this process exits."""
        assert self.transport is not None
        self.transport.close()
        self.transport = None
        if self.handles is not None and self.handles.cuda_ring is not None:
            object.__setattr__(self.handles, "cuda_ring", None)
            gc.collect()
            torch.cuda.ipc_collect()

    def _shutdown(self) -> dict[str, Any]:
        self.shutting_down = True
        self.shutdown.iteration = self.iteration
        self.shutdown.cancellation = self.cancellation.record()
        self._step("stop collector", self._stop_collector)
        self.shutdown.collector = self.collector.record() if self.collector is not None else dict(NO_COLLECTOR)
        counters = self.arrays["control"].copy() if self.arrays is not None and self.arrays.arrays else None
        self.backend_diagnostics = self._step("backend diagnostics", lambda: read_backend_diagnostics(
            self.diagnostics_path, self.resolved.composed.sim, keep_file=self.is_main))
        if self.transport is not None:
            self._step("close transport", self._close_transport)
        if self.arrays is not None:
            errors = self._step("close shared memory", self.arrays.close) or []
            self.shutdown.cleanup_errors.extend(errors)
        completed = self.shutdown.classification == "normal_completion"
        if self.rank is not None and not completed and self.is_main:
            self.rank.stop.set()  # the other ranks end too
        if self.agent is not None:
            self._step("final checkpoint", lambda: self._checkpoint("model_final.pt"))
        if self.device_log is not None and self.logger is not None:
            self._step("flush logs", lambda: self._flush_log(across_ranks=False))
        if self.agent is not None:
            self.learner_diagnostics = self._step("learner diagnostics", self._learner_diagnostics)
            self._step("release captured graphs", self.agent.close)  # before the group that they use goes
        if self.rank is not None:
            self._step("leave the rank group", lambda: self._leave_ranks(completed))
        if not self.is_main:
            return build_rank_report(self.outcome(), counters)
        if self.logger is not None:
            self._step("progress", lambda: self.logger.progress(self.iteration, self.env_steps * self.world_size,
                                                                force=True))
            self._step("close logger", self.logger.close)
        cause = self.shutdown.stop_reason if completed else self.shutdown.classification
        self.segments = self._step("segments", lambda: end_segment(self.run_dir, self.iteration, cause))
        summary = build_summary(self.outcome(), counters)
        self._step("validate run summary", lambda: validate_summary(summary))
        summary["runtime_manifest"]["shutdown"]["cleanup"]["errors"] = list(self.shutdown.cleanup_errors)
        try:
            write_json_atomic(self.run_dir / "run_summary.json", summary)
        except OSError as exc:  # e.g. a full disk: say so in one line; the caller still gets the summary
            self.summary_error = f"cannot write {self.run_dir / 'run_summary.json'}: {exc.strerror or exc}"
            print(f"train: error: {self.summary_error}", file=sys.stderr, flush=True)
        return summary

    def _wandb_sink(self, record: dict[str, Any]) -> WandbSink | None:
        """Rank 0's W&B run, when `training.loggers` names wandb: the resolved run config as its config.
        Name, group and tags follow W&B's own variables (WANDB_NAME, WANDB_RUN_GROUP, WANDB_TAGS; the DAG
        sets them for sweeps and records); the name defaults to the run dir's."""
        training = self.cfg.training
        if "wandb" not in training.loggers:
            return None
        name = os.environ.get("WANDB_NAME") or self.run_dir.name
        if self.resume is not None:  # a new W&B run per segment: W&B keeps a step only once per run
            name = f"{name}-from-{self.start_iteration}"
        return WandbSink(self.run_dir, training.wandb_project, record, name, group=None, tags=())

    def _leave_ranks(self, completed: bool) -> None:
        """Leave the group (if it was joined); rank 0 then collects every rank's report and adopts the
        failure of the rank that ended the run."""
        assert self.rank is not None
        if self.group is not None:
            self.group.leave(completed)
        if not self.is_main:
            return
        self.peer_reports = collect_peers(self.rank, self.run_dir)
        failure = first_failure(self.peer_reports, self.rank.peers, self.shutdown.classification)
        if failure is not None:
            self.shutdown.classification, self.shutdown.owner, self.shutdown.exception = failure

    def _learner_diagnostics(self) -> dict[str, Any]:
        return {"cuda_graph": self.agent.capture_diagnostics(), "resume": self.resume_record,
                "schedule": {"update_lag_vectors": UPDATE_LAG_VECTORS,
                             "log_interval_iterations": self.settings.collector_metrics_interval,
                             "n_step": {"requested": self.replay.n_step_requested,
                                        "effective": self.replay.n_step}}}
