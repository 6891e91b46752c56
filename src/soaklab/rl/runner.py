"""The learner: one rank's training run, from its start to its shutdown (docs/runtime.md).

A run always ends the same way, completed or failed: stop the collector, release the channels, write
the final checkpoint, flush and close the loggers, write run_summary.json; cleanup errors are
recorded, never raised over the original error. With data parallelism (soaklab.rl.ranks) every rank
runs a Learner; rank 0 alone logs, checkpoints and writes the summary, the others report their end to it.

The Learner holds its parts (docs/architecture.md, "The learner in parts"): what it trains
(`learning`), its collector and the channels to it (`exchange`), its checkpoints and resume
(`learner_checkpoints`), its loggers (`learner_log`), the wall-clock budget (`wall_budget`), the
finiteness and divergence guards (`guards`) and the update schedule (`schedule`); `_loop` runs an
iteration's steps through them.
"""

from __future__ import annotations

import multiprocessing as mp
import random
import sys
import time
from pathlib import Path
from typing import Any

import torch

from soaklab.config.run_config import ResolvedRun
from soaklab.host import determinism
from soaklab.host.info import usable_cores
from soaklab.host.lifetime import leave
from soaklab.rl.cancel import Cancellation
from soaklab.rl.channels import C
from soaklab.rl.collector_process import diagnostics_path, non_finite_path, process_sharing_evidence
from soaklab.rl.exchange import Exchange
from soaklab.rl.faults import Fault, fault_from_env
from soaklab.rl.finite import CLASSIFICATION as CLASSIFICATION_NON_FINITE
from soaklab.rl.guards import Guards
from soaklab.rl.learner_checkpoints import LearnerCheckpoints
from soaklab.rl.learner_log import LearnerLog
from soaklab.rl.learning import Learning
from soaklab.rl.rank_group import RankGroup, leave_group
from soaklab.rl.ranks import RankContext, RankGone, rank_run
from soaklab.rl.resume import Checkpoint, end_segment
from soaklab.rl.run_summary import LearnerOutcome, build_rank_report, write_summary
from soaklab.rl.schedule import UPDATE_LAG_VECTORS, UpdateSchedule
from soaklab.rl.shutdown import ENDING, Shutdown, classify
from soaklab.rl.timing import PhaseTimer
from soaklab.rl.trace import LearnerTrace, trace_from_env
from soaklab.rl.wall_budget import WallBudget


def seed_everything(seed: int) -> None:
    """algo.seed seeds the global Python and torch RNGs (not numpy's, per the seed contract)."""
    random.seed(seed)
    torch.manual_seed(seed)


class Learner:
    """`hold_updates` (benchmarks only): always answer with the policy, never update."""

    def __init__(self, resolved: ResolvedRun, run_dir: Path, hold_updates: bool = False,
                 rank: RankContext | None = None, resume: Checkpoint | None = None,
                 code: dict[str, Any] | None = None) -> None:  # code: soaklab.host.run_code's record
        self.hold_updates = hold_updates
        self.resolved, self.run_dir, self.settings = resolved, run_dir, resolved.settings
        self.rank, self.rank_index = rank, rank.rank if rank is not None else 0
        self.is_main = self.rank_index == 0
        self.world_size = rank.world_size if rank is not None else 1
        self.cfg = rank_run(resolved.run, self.rank_index, len(resolved.layout.group_bounds))
        self.layout, self.device = resolved.layout, torch.device(resolved.devices.learner)
        fault = fault_from_env()
        self.fault: Fault | None = fault if fault is not None and fault.rank == self.rank_index else None
        self.group: RankGroup | None = None  # the data-parallel group, once joined
        self.peer_reports: list[dict[str, Any] | None] | None = None  # how ranks 1..N-1 ended (rank 0)
        self.shutting_down = False
        self.max_iterations, self.save_interval = self.cfg.algo.max_iterations, self.cfg.algo.save_interval
        self.shutdown = Shutdown()
        self.cancellation = Cancellation()
        self.checkpoints = LearnerCheckpoints(run_dir, resume, self.world_size, self.fault, code)
        self.start_iteration, self.iteration = self.checkpoints.start_iteration, 0
        self.env_steps = 0
        self.segments: list[dict[str, Any]] | None = None  # read back at shutdown (rank 0)
        self.budget = WallBudget(self.cfg.training.max_wall_minutes,
                                 float(resume.learner.get("elapsed_s", 0.0)) if resume is not None else 0.0)
        self.guards = Guards(self.device, self.cfg.algo.num_envs, non_finite_path(run_dir, self.rank_index))
        self.exchange = Exchange(self.layout, self.device, self._alive, diagnostics_path(run_dir, self.rank_index))
        self.log: LearnerLog | None = None
        self.learning: Learning | None = None
        self.backend_diagnostics: dict[str, Any] | None = None
        self.learner_diagnostics: dict[str, Any] | None = None
        self.summary_error: str | None = None  # why run_summary.json could not be written, if it could not
        self.cuda_process_sharing: dict[str, Any] | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        self.cancellation.install()
        try:
            self.shutdown.stop_reason = self._run()
            self.shutdown.classification = "normal_completion"
            self.shutdown.phase = "complete"
        except ENDING as exc:
            self._failed(*classify(exc, self.is_main), exc)
        finally:
            self.cancellation.ignore()  # shutdown must not be interrupted by a second signal
            summary = self._shutdown()
            self.cancellation.restore()
        return summary

    def _failed(self, classification: str, owner: str, exc: BaseException) -> None:
        if classification == "learner_failure" and self.exchange.collector_gone():
            classification, owner = "collector_failure", "collector"
        if classification != "external_cancellation":
            found = self.guards.first_non_finite()
            if found is not None:  # what failed next (a collector gone, an index out of range) is its consequence
                classification, owner, exc = CLASSIFICATION_NON_FINITE, found[0], found[1]
        self.shutdown.failed(classification, owner, exc)
        who = f"rank {self.rank_index} " if self.world_size > 1 else ""
        print(f"train: {who}error: {classification}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)

    def outcome(self) -> LearnerOutcome:
        """How this rank's run stands now, as values (what rl.summary reads)."""
        return LearnerOutcome(
            resolved=self.resolved, rank_index=self.rank_index, parallel=self.rank is not None, device=self.device,
            shutdown=self.shutdown.record(), iteration=self.iteration, env_steps=self.env_steps,
            final_fps=self.log.final_fps if self.log is not None else 0.0, wall_time_s=self.budget.run_s(),
            backend_diagnostics=self.backend_diagnostics, learner_diagnostics=self.learner_diagnostics,
            cuda_process_sharing=self.cuda_process_sharing,
            rank_records=self.group.records if self.group is not None else None, peer_reports=self.peer_reports,
            dp_warmed_up=bool(self.group is not None and self.group.dp.warmed_up),
            segments=self.segments, loggers=self.log.logger.states() if self.log is not None else None)

    def _run(self) -> str:
        """Train; why the run stopped (max_iterations or time_budget)."""
        if self.cfg.training.deterministic:  # before the first cuBLAS call; the collector inherits its env
            determinism.enter(self.cfg.algo.seed)
        seed_everything(self.cfg.algo.seed)
        # Intra-op threads are fixed by config (env.num_threads, default all cores): learner and
        # collector take turns on the same cores in lock-step, and a fixed count keeps CPU runs
        # bitwise reproducible.
        torch.set_num_threads(self.cfg.env.num_threads or usable_cores())
        algo, resume = self.cfg.algo, self.checkpoints.resume
        ctx = mp.get_context("spawn")
        carrier = self.resolved.devices.carrier
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        if self.rank is not None:
            self.shutdown.phase = "rendezvous"
            self.group = RankGroup.join(self.rank, self.run_dir, self.device, carrier, self._stuck)
        self.exchange.open(ctx, carrier)
        record = self.resolved.record()
        self.config_hash = record["config_hash"]  # every checkpoint names its run's configuration
        self.log = LearnerLog.open(self.run_dir, record, self.cfg, self.is_main,
                                   self.start_iteration if resume is not None else None,
                                   self.checkpoints.due("kill_carry"), self.layout.num_envs, self.world_size)
        self.learning = Learning.build(self.resolved, algo, self.device)
        if self.group is not None:
            self.learning.agent.join(self.group.dp)
        self.timer = PhaseTimer(self.device)
        self.trace = LearnerTrace(trace_from_env(self.run_dir, "learner") if self.is_main else None)
        self.cuda_process_sharing = process_sharing_evidence(self.resolved, self.device)
        if resume is not None:
            self.env_steps = self.checkpoints.restore(self.learning, self.exchange.metrics)
        # Read once: ResolvedRun derives them from its config (a copy), and every iteration logs them.
        self.metric_names = self.resolved.collector_metrics
        self.shutdown.phase = "spawn"
        # Nothing is written meanwhile: progress.json appears only once the training loop can run, so
        # a watcher tells start-up (no progress.json yet) from training (progress.json rewritten).
        self.exchange.spawn(
            ctx, self.resolved.mps, self._check_ranks, task=self.resolved.composed.task, run=self.cfg,
            scene=self.resolved.scene, vector_steps=self.max_iterations,
            metrics_interval=self.settings.collector_metrics_interval, metric_names=self.metric_names,
            fault=self.fault, non_finite_path=str(self.guards.non_finite_path),
            run_dir=str(self.run_dir) if self.checkpoints.resumable else None, save_interval=self.save_interval,
            resume_from=str(resume.collector) if resume is not None else None,
            trace_run_dir=str(self.run_dir) if self.trace.trace is not None else None)
        self.log.progress(self.start_iteration, self.env_steps, force=True)
        self.shutdown.phase = "training"
        return self._loop()

    def _stuck(self, reason: str) -> None:
        """The watch thread's last resort: the training thread has not noticed the other ranks' end
        (it waits in a collective that cannot fail), so shut this rank down from here and exit."""
        if self.shutting_down:
            return
        gone = RankGone(reason)
        self._failed(*classify(gone, self.is_main), gone)
        result = self._shutdown()
        if self.is_main:
            print(f"train: failed ({result['runtime_manifest']['shutdown']['classification']}) after "
                  f"{self.iteration} iterations; {self.run_dir / 'run_summary.json'}", file=sys.stderr, flush=True)
        elif self.rank is not None and self.rank.report is not None:
            self.rank.report.send(result)
        leave(1)

    def _alive(self) -> bool:
        """Polled by every wait on the collector: also the learner's safe point for a cancellation."""
        self.cancellation.check()
        return self.exchange.collector_alive()

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
        schedule = self._start_loop()
        for it in range(self.start_iteration, self.max_iterations):
            signalled = self._safe_point(it)
            self.exchange.answer(self.learning.policy(schedule.random_actions(it)), self.timer)
            updated, update_rows = self._update(schedule, it)
            with self.exchange.ingesting():
                self._take_in(it, updated, update_rows)
            # The budget ends the run after a whole iteration: its rows logged, then the final
            # checkpoint (at shutdown) holds everything it trained on.
            last = it + 1 == self.max_iterations or self.budget.spent() or signalled
            self._end_iteration(it, last, signalled)
            if last:
                break
        return self._end_loop()

    def _start_loop(self) -> UpdateSchedule:
        agent, replay = self.learning.agent, self.learning.replay
        schedule = UpdateSchedule.of(self.cfg.algo.learning_starts, self.cfg.algo.updates_per_step,
                                     replay.n_step, agent.warmup_actions, self.hold_updates)
        agent.bind(replay, self.cfg.algo.batch_size)
        self.guards.watch_diagnostics(agent.diag_names)
        self.log.begin(self.settings.collector_metrics_interval, agent.diag_names, self.device,
                       self.metric_names, self.exchange.control)
        if self.checkpoints.resumable:
            self.cancellation.defer()  # a signal finishes the iteration and checkpoints (soaklab.rl.cancel)
        return schedule

    def _safe_point(self, it: int) -> bool:
        """The iteration's start: a cancellation noticed, the ranks checked, a test's fault fired.
        True: a signal asks a resumable run to finish this iteration and checkpoint."""
        self.iteration = it
        self.cancellation.check()
        signalled = self.checkpoints.resumable and self.cancellation.finish_first()
        if signalled:  # before this step's answers: the collector saves after stepping it
            self.exchange.control[C.SAVE_AT] = it + 1
        self._check_ranks()
        if self.fault is not None:
            self.fault.fire_in_learner(it)
        return signalled

    def _update(self, schedule: UpdateSchedule, it: int) -> tuple[bool, int]:
        """Update round `it` (transitions up to vector step it - 1), while the envs step: whether it
        ran, and the replay rows it sampled from."""
        updates = schedule.updates(it)
        if updates <= 0:
            return False, 0
        update_rows = self.learning.replay.size
        self.exchange.join()  # the last vector's ingress and reward statistics, before the update reads them
        self.trace.round(it, self.learning, self.cfg.algo.batch_size, updates, self.timer)
        self.guards.updated(it, self.learning.agent.non_finite_diagnostics())
        return True, update_rows

    def _take_in(self, it: int, updated: bool, update_rows: int) -> None:
        """Vector step `it`'s transitions into the replay ring (the control block counts the chunks from
        this process's start), and the iteration's row logged. What reads the vector stays on the
        ingress stream (on CUDA): the next inference does not wait for it, the next update does."""
        agent, replay = self.learning.agent, self.learning.replay
        rewards, dones = self.exchange.ingest((it + 1 - self.start_iteration) * self.layout.chunks_per_vector,
                                              replay, self.timer)
        self.guards.rewards(it, rewards)
        self.trace.ingested(it, replay, self.layout.num_envs, self.exchange.join)
        agent.observe_rewards(rewards, dones)
        self.env_steps += self.layout.num_envs
        self.log.record(it, rewards, dones, agent.diagnostics, updated, update_rows, self.timer,
                        self.exchange.control, self.exchange.metrics, replay.size)

    def _end_iteration(self, it: int, last: bool, signalled: bool) -> None:
        """Its rows flushed every logging interval, progress.json, and the checkpoints due."""
        if self.log.full or last:
            self._flush_log()
        self.log.iteration_done(it + 1, self.env_steps, self.exchange.control)
        self.iteration = it + 1
        if (it + 1) % self.save_interval == 0:
            self._checkpoint(f"model_{it + 1}.pt")
            if self.checkpoints.resumable and not last:
                self._save_resume(it + 1)
        if signalled and it + 1 < self.max_iterations:
            self._save_resume(it + 1)
            self.cancellation.end(checkpoint=it + 1)

    def _end_loop(self) -> str:
        self.exchange.join()
        self.guards.drain()  # a GPU's last flags: a run that ends non-finite never ends completed
        self.log.progress(self.iteration, self.env_steps, force=True)
        self.log.last_line(self.iteration, self.learning.stats)
        return self.budget.stop_reason(self.iteration, self.max_iterations)

    def _flush_log(self, across_ranks: bool = True) -> None:
        """Write the buffered iterations (soaklab.rl.learner_log); a failed run's last rows stay rank 0's own."""
        self.exchange.join()  # the device rows were written on the ingress stream
        dp = self.group.dp if self.group is not None and across_ranks else None
        self.log.flush(self.learning.stats, dp, self.device, None if self.shutting_down else self.guards)

    def _checkpoint(self, name: str) -> None:
        if self.is_main:  # every rank holds the same model: rank 0's checkpoint is the run's
            self.exchange.join()  # the reward statistics are updated on the ingress stream
            self.checkpoints.policy(name, self.iteration, self.env_steps, self.config_hash, self.learning.agent,
                                    self.budget)

    def _save_resume(self, k: int) -> None:
        """Resumable checkpoint k, its event rows up to iteration k - 1 on disk first."""
        started = time.perf_counter()
        self._flush_log()
        self.log.logger.sync()
        self.checkpoints.save(k, started, self.learning, self.exchange.metrics, self.env_steps, self.config_hash,
                              self.budget.elapsed_s())

    # -- shutdown ----------------------------------------------------------------------------------
    def _shutdown(self) -> dict[str, Any]:
        self.shutting_down = True
        self.shutdown.iteration = self.iteration
        self.shutdown.cancellation = self.cancellation.record()
        counters, self.backend_diagnostics = self.exchange.close(self.shutdown, self.resolved.composed.sim,
                                                                 keep_diagnostics=self.is_main)
        completed = self.shutdown.classification == "normal_completion"
        if self.rank is not None and not completed and self.is_main:
            self.rank.stop.set()  # the other ranks end too
        if self.learning is not None:
            self.shutdown.step("final checkpoint", lambda: self._checkpoint("model_final.pt"))
        if self.log is not None and self.log.device_log is not None:
            self.shutdown.step("flush logs", lambda: self._flush_log(across_ranks=False))
        if self.learning is not None:
            self.learner_diagnostics = self.shutdown.step("learner diagnostics", lambda: self.learning.diagnostics(
                self.checkpoints.record, self.settings.collector_metrics_interval, UPDATE_LAG_VECTORS))
            # Before the group that they use goes.
            self.shutdown.step("release captured graphs", self.learning.agent.close)
        if self.rank is not None:  # rank 0 adopts the failure of the rank that ended the run
            self.peer_reports = self.shutdown.step("leave the rank group", lambda: leave_group(
                self.rank, self.group, self.run_dir, completed, self.shutdown))
        if not self.is_main:
            return build_rank_report(self.outcome(), counters)
        if self.log is not None:
            self.shutdown.step("progress", lambda: self.log.progress(self.iteration, self.env_steps, force=True))
            self.shutdown.step("close logger", self.log.logger.close)
        cause = self.shutdown.stop_reason if completed else self.shutdown.classification
        self.segments = self.shutdown.step("segments", lambda: end_segment(self.run_dir, self.iteration, cause))
        summary, self.summary_error = write_summary(self.run_dir, self.outcome(), counters, self.shutdown)
        return summary
