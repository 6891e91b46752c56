"""A resumed run's event file, carried so that a kill at any moment loses nothing (docs/runtime.md,
"Resuming a run").

A run keeps one event file. A resume at iteration k keeps its readable rows before k and drops the
rest (the killed segment's lost work, which the resume redoes), in steps each safe to be killed at:

1. `prepare` (read only, before anything is written or spawned): a leftover of a killed carry is
   named, and a file whose records cannot be found is refused (InvalidInput, naming the byte offset);
   what is kept and which gaps damaged records leave is planned (metrics.events.plan_carry);
2. `rewrite`: the leftovers go; the kept records are written under a temporary name, synced, and
   renamed over the old file. Killed before the rename, the old file is whole and the temporary
   file is removed by the next resume;
3. the logger (rl.logging.RunLogger): TensorBoard's writer opens the run's new event file, the
   kept records are copied into it, synced, and only then is the old file removed. Killed in
   between, the run dir holds two event files, the new one's records a prefix of the old one's:
   the next resume removes the new one and carries again.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from soaklab.errors import InvalidInput
from soaklab.metrics.events import CarryPlan, frame_records, parse_event, plan_carry, record_bodies

EVENTS_GLOB = "events.out.tfevents.*"
CARRY_TMP = "events.carry.tmp"  # outside EVENTS_GLOB: no reader takes it for the run's event file


@dataclass(frozen=True)
class Carry:
    plan: CarryPlan | None  # None: the run had written no event file yet
    leftovers: tuple[Path, ...]  # what a killed carry left, removed by rewrite()


def _events(path: Path) -> list[object]:
    """The file's events without their wall times: a carry by an earlier soaklab stamped them anew. A
    body that is no Event stays its bytes: it equals only itself."""
    out: list[object] = []
    for body in record_bodies(path, upto_damage=True):
        event = parse_event(body)
        if event is None:
            out.append(body)
        elif not event.HasField("file_version"):
            event.ClearField("wall_time")
            out.append(event)
    return out


def _leftover(a: Path, b: Path) -> Path | None:
    """Of two event files, the one a killed carry left: its events (compared as messages, their
    wall times aside) are a prefix of the other's. Equal files: the second by name, so the choice
    is the same every time."""
    ea, eb = _events(a), _events(b)
    if ea == eb[:len(ea)] and len(ea) < len(eb):
        return a
    if eb == ea[:len(eb)]:
        return b
    return None


def prepare(run_dir: Path, before_step: int) -> Carry:
    """Step 1: what the resume at `before_step` carries, and what a killed carry left to remove."""
    leftovers = [run_dir / CARRY_TMP] if (run_dir / CARRY_TMP).exists() else []
    found = sorted(run_dir.glob(EVENTS_GLOB))
    if len(found) == 2 and (gone := _leftover(*found)) is not None:
        leftovers.append(gone)
        found.remove(gone)
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise InvalidInput(f"--resume {run_dir}: {len(found)} event files ({names}), and none is a killed "
                           "resume's partial copy of another; a run resumes with exactly one")
    return Carry(plan_carry(found[0], before_step) if found else None, tuple(leftovers))


def rewrite(carry: Carry, kill_before_rename: bool = False) -> None:
    """Step 2: the leftovers removed, the old event file replaced, in one rename, by its kept records.
    `kill_before_rename`: the test hook SOAKLAB_FAULT=kill_carry_tmp@<k> (soaklab.rl.faults)."""
    from tensorboard.compat.proto.event_pb2 import Event

    for path in carry.leftovers:
        path.unlink(missing_ok=True)
    if carry.plan is None:
        return
    source = carry.plan.source
    header = Event(wall_time=time.time(), file_version="brain.Event:2").SerializeToString()
    tmp = source.parent / CARRY_TMP
    with open(tmp, "wb") as f:
        f.write(frame_records((header, *carry.plan.bodies)))
        f.flush()
        os.fsync(f.fileno())
    if kill_before_rename:
        os.kill(os.getpid(), signal.SIGKILL)
    tmp.replace(source)
    sync_dir(source.parent)


def sync_dir(path: Path) -> None:
    """A rename or unlink in `path` on disk (a crash of the machine, not only of the process)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
