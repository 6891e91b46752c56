"""`soaklab train`: claim the run dir, write its record, run the learner (docs/runtime.md).

The configuration arrives resolved (soaklab.config.resolve): this module never composes or probes.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soaklab.config.run_config import ResolvedRun
from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import read_json, write_json_atomic
from soaklab.files.rundir import CONSOLE_LOG, LOCK, RUN_CONFIG, check_new_or_empty, claim

if TYPE_CHECKING:
    from soaklab.rl.checkpoint_structure import Expected
    from soaklab.rl.event_carry import Carry
    from soaklab.rl.ranks import RankContext
    from soaklab.rl.resume import Checkpoint


def prepare_run_dir(resolved: ResolvedRun) -> tuple[Path, ResolvedRun]:
    """The run dir must be new or empty (the monitor reads file changes in it as liveness), save the
    monitor's console log and the very record this trainer runs. The run dir is the resolved
    training.log_dir: resolution names one for every new run (soaklab.config.resolve.obtain)."""
    configured = resolved.run.training.log_dir
    if configured is None:
        raise ValueError("training.log_dir: a run to train needs a run dir; resolve it with "
                           "soaklab.config.resolve.obtain(new_run=True), or set training.log_dir")
    run_dir = Path(configured)
    record = resolved.record()
    allowed = (CONSOLE_LOG, LOCK, RUN_CONFIG) if _same_record(run_dir / RUN_CONFIG, record) else (CONSOLE_LOG, LOCK)
    check_new_or_empty("training.log_dir", run_dir, allowed)
    run_dir.mkdir(parents=True, exist_ok=True)
    claim(run_dir)
    write_json_atomic(run_dir / RUN_CONFIG, record)
    return run_dir, resolved


def _same_record(path: Path, record: dict[str, Any]) -> bool:
    try:
        return read_json(path).get("config_hash") == record["config_hash"]
    except (OSError, ValueError, AttributeError):
        return False


def _thread_error_line(args: threading.ExceptHookArgs) -> None:
    """A helper thread's failure (TensorBoard's event writer on a full disk, say) in one line: the
    training thread notices it on its own and fails the run; a traceback would only bury that line."""
    name = args.thread.name if args.thread is not None else "thread"
    print(f"train: error: {name}: {args.exc_type.__name__}: {args.exc_value}", file=sys.stderr, flush=True)


def budget_words(resolved: ResolvedRun) -> str:
    minutes = resolved.run.training.max_wall_minutes
    return "" if minutes is None else f" or {minutes:g} min of wall clock, whichever ends first"


def resume_run_dir(resolved: ResolvedRun, run_dir: Path, code: dict[str, Any]
                   ) -> tuple[Path, ResolvedRun, Checkpoint, Carry]:
    """The interrupted run dir to continue, its newest readable checkpoint and what its event file
    carries, checked before anything starts; the dir is claimed as a new run's would be. `code`:
    what this process runs (soaklab.host.run_code), which must be what made the checkpoint."""
    from soaklab.rl.event_carry import prepare
    from soaklab.rl.resume import check_resumable, read_segments

    if resolved.ranks.parallel:
        raise InvalidInput(f"--resume {run_dir}: resuming is for one-rank runs for now "
                           f"(this one has {resolved.ranks.world_size} ranks)")
    # The recorded config as it is (its log_dir included): a run dir moved elsewhere still resumes.
    found = check_resumable(run_dir, expected_checkpoint(resolved), code)
    read_segments(run_dir, required=True)  # the history this resume extends: refused, never replaced
    carry = prepare(run_dir, found.iteration)
    claim(run_dir)
    return run_dir, resolved, found, carry


def expected_checkpoint(resolved: ResolvedRun) -> Expected:
    """What a checkpoint of this (one-rank) run holds, as its config tells (soaklab.rl.checkpoint_structure)."""
    from soaklab.rl.checkpoint_structure import Expected

    layout, algo = resolved.layout, resolved.run.algo
    return Expected(config_hash=resolved.record()["config_hash"], learner_device=resolved.devices.learner,
                    num_envs=algo.num_envs, replay_capacity=algo.replay_buffer_size, row_width=layout.row_width,
                    metrics=layout.shapes()["metrics"][0][0], terms=len(resolved.collector_metrics),
                    obs_dim=layout.obs_dim, critic_dim=layout.critic_dim,
                    groups=tuple(b - a for a, b in layout.group_bounds))


def train(resolved: ResolvedRun, resume: Path | None = None) -> tuple[Path, dict[str, Any]]:
    """Run `resolved` to its end: its run dir and summary. What a completed standalone run does
    next with its policy (export, playback) is the caller's (soaklab.policy.post_training).
    `resume`: an interrupted run dir to continue from its newest checkpoint (soaklab.rl.resume)."""
    from soaklab.host.lifetime import dump_stacks_on_signal
    from soaklab.host.run_code import run_code
    from soaklab.rl.event_carry import rewrite
    from soaklab.rl.faults import fault_from_env
    from soaklab.rl.resume import begin_segment
    from soaklab.rl.runner import Learner

    checkpoint = carry = None
    composed = resolved.composed
    code = run_code(composed.algo, composed.task, composed.sim)
    if resume is not None:  # refused before anything starts
        run_dir, resolved, checkpoint, carry = resume_run_dir(resolved, resume, code)
    dump_stacks_on_signal()
    fault = fault_from_env()
    if fault is not None and fault.name == "hang_startup":
        while True:  # a trainer that never writes anything: the monitor's startup timeout must end it
            time.sleep(1.0)
    origin = resolved.origin
    if checkpoint is not None:
        for note in checkpoint.notes:
            print(f"train: warning: {note}", file=sys.stderr, flush=True)
        print(f"train: resuming {run_dir} at iteration {checkpoint.iteration} "
              f"({checkpoint.learner['env_steps']} env steps)", flush=True)
    else:
        run_dir, resolved = prepare_run_dir(resolved)
    # The segment first, with the gaps its carry leaves: a kill before the rewrite below plans them again.
    begin_segment(run_dir, checkpoint.iteration if checkpoint else 0, checkpoint.iteration if checkpoint else None,
                  carry.plan.record() if carry is not None and carry.plan is not None else None, code)
    if carry is not None and checkpoint is not None:
        for gap in carry.plan.gaps if carry.plan is not None else ():
            print(f"train: warning: {gap['file']}: {gap['damage']} at bytes {gap['byte_start']}..{gap['byte_end']}: "
                  f"rows of steps {gap['steps'][0]}..{gap['steps'][1]} may be lost; the gap is declared in "
                  "run_summary.json (event_gaps)", file=sys.stderr, flush=True)
        due = fault is not None and fault.iteration == checkpoint.iteration
        if due and fault.name == "kill_segment":  # test hook: the segment recorded, nothing carried yet
            os.kill(os.getpid(), signal.SIGKILL)
        rewrite(carry, kill_before_rename=due and fault.name == "kill_carry_tmp")
    print(f"train: config {origin}", flush=True)
    print(resolved.devices.mapping_line(), flush=True)
    print(f"train: {resolved.composed.algo}/{resolved.composed.task}/{resolved.composed.sim} "
          f"{resolved.run.algo.num_envs} envs x {resolved.run.algo.max_iterations} iterations{budget_words(resolved)} "
          f"-> {run_dir}", flush=True)
    threading.excepthook = _thread_error_line
    rank = None
    if resolved.ranks.parallel:
        from soaklab.rl.ranks import start_ranks

        plan = resolved.ranks
        print(f"train: {plan.world_size} data-parallel ranks ({plan.backend}), one collector each; "
              "rank 0 logs for all", flush=True)
        rank = start_ranks(resolved, run_dir, rank_main)
    learner = Learner(resolved, run_dir, rank=rank, resume=checkpoint, code=code)
    summary = learner.run()
    if learner.summary_error is not None:
        summary["status"] = "failed"  # what the caller reports; the file itself could not be written
        summary["failure_reason"] = summary["failure_reason"] or learner.summary_error
    return run_dir, summary


def rank_main(resolved: ResolvedRun, run_dir: Path, ctx: RankContext) -> None:
    """Ranks 1..N-1 (the target start_ranks spawns): a learner like rank 0's, silent, its end reported
    to rank 0."""
    from soaklab.host.lifetime import dump_stacks_on_signal, exit_now, set_parent_death_signal
    from soaklab.rl.ranks import confine
    from soaklab.rl.runner import Learner

    assert ctx.parent_pid is not None and ctx.report is not None
    set_parent_death_signal(signal.SIGTERM, ctx.parent_pid)  # rank 0 gone: shut down cleanly
    dump_stacks_on_signal()
    confine(ctx)
    learner = Learner(resolved, run_dir, rank=ctx)
    report = learner.run()
    try:
        ctx.report.send(report)
    finally:
        ctx.report.close()
    sys.stdout.flush()
    code = 0 if report["shutdown"]["classification"] == "normal_completion" else 1
    if code and ctx.backend == "nccl":
        exit_now(code)  # a failed NCCL group: the interpreter's teardown would block (exit_now says why)
    sys.exit(code)
