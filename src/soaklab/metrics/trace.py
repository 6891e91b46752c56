"""Two runs' traces compared: the first step, stage and tensor where they differ (docs/determinism.md,
"Finding a difference").

A trace is what `SOAKLAB_TRACE=1` made a run write into `<run dir>/trace/` (soaklab.rl.trace): per
step and stage, a digest of each tensor. The first difference is the earliest step, then the earliest
stage in the order a difference propagates (STAGES), then the first tensor by name. Where both runs
saved that step's tensors whole (`SOAKLAB_TRACE_DUMP=N`), the tensor's values are compared too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soaklab.errors import InvalidInput

TRACE_DIR = "trace"
SIDES = ("collector", "learner")
# Within an iteration: the collector's step (the actions it was answered, the physics, the rewards, the
# observations), then the learner's update round (the rows it samples, its losses, the weights after
# it), then the vector taken into replay.
STAGES = ("action", "physics", "reward", "observation", "sample", "loss", "weights", "replay")
MAX_LINE = 1 << 20  # a trace line holds digests only; a longer one was not written by soaklab


@dataclass(frozen=True)
class Difference:
    step: int
    stage: str
    name: str
    a: str | None  # the digest in run A (None: absent there)
    b: str | None

    def line(self, names: tuple[str, str] = ("A", "B")) -> str:
        """`names`: how the line names the two runs (their dirs, in diff-runs)."""
        what = (f"missing in {names[0]}" if self.a is None else f"missing in {names[1]}" if self.b is None
                else f"{self.a} in {names[0]}, {self.b} in {names[1]}")
        return f"first difference: step {self.step}, {self.stage} tensor {self.name} ({what})"


def read_trace(run_dir: Path) -> dict[tuple[int, str], dict[str, str]]:
    """(step, stage) -> {tensor name: digest} of a run's trace; a step's last line wins (a resumed run
    writes again the steps after its checkpoint). Refused in one line: no trace, a line that is not a
    trace record (a cut last line, a killed writer's, is skipped)."""
    folder = run_dir / TRACE_DIR
    files = [folder / f"{side}.jsonl" for side in SIDES if (folder / f"{side}.jsonl").is_file()]
    if not files:
        raise InvalidInput(f"{run_dir}: no trace ({folder}/collector.jsonl, learner.jsonl); "
                           "run it with SOAKLAB_TRACE=1")
    out: dict[tuple[int, str], dict[str, str]] = {}
    for path in files:
        with path.open("rb") as handle:
            lines = handle.readlines(1 << 34)
        records = 0
        for number, raw in enumerate(lines, 1):
            record = _record(raw)
            if record is None:
                if number == len(lines) and not raw.endswith(b"\n"):
                    continue  # cut by a kill
                raise InvalidInput(f"{path}:{number}: not a trace record (step, stage, digests)")
            out[(record["step"], record["stage"])] = record["digests"]
            records += 1
        if not records:
            raise InvalidInput(f"{path}: an empty trace (no step recorded); the run ended before its first step "
                               "or the file was emptied; trace it again")
    return out


LEARNER_STAGES = ("sample", "loss", "weights", "replay")  # learner.jsonl's; the others are collector.jsonl's


def side_of(stage: str) -> str:
    return "learner" if stage in LEARNER_STAGES else "collector"


def last_step(trace: dict[tuple[int, str], dict[str, str]], side: str) -> int:
    """The last step of `side`'s stages the trace holds (-1: none)."""
    return max((step for step, stage in trace if side_of(stage) == side), default=-1)


def ends_line(a: dict[tuple[int, str], dict[str, str]], b: dict[tuple[int, str], dict[str, str]],
              diff: Difference, names: tuple[str, str] = ("A", "B")) -> str | None:
    """Where the difference is only that one side's trace stops before the other's (a killed or
    shorter run: the stage is absent there and nothing of that side comes after it): which one ends
    where (`names`: how the line names a and b), else None."""
    if diff.a is not None and diff.b is not None:
        return None
    short, other = ("B", "A") if diff.b is None else ("A", "B")
    traces = {"A": a, "B": b}
    lacking, side = traces[short], side_of(diff.stage)
    at = (diff.step, STAGES.index(diff.stage))
    later = any((step, STAGES.index(stage)) > at for step, stage in lacking if side_of(stage) == side)
    if (diff.step, diff.stage) in lacking or later or last_step(lacking, side) < 0:
        return None  # a tensor or a stage it lacks in the middle, or a side it never traced
    label = dict(zip(("A", "B"), names, strict=True))
    return (f"{label[short]}'s {side} trace ends at step {last_step(lacking, side)} ({label[other]}'s at "
            f"{last_step(traces[other], side)}); equal up to there (a killed or shorter run, not a difference "
            "in what they computed)")


def _record(raw: bytes) -> dict[str, Any] | None:
    if len(raw) > MAX_LINE:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    ok = (isinstance(value, dict) and type(value.get("step")) is int and value["step"] >= 0
          and value.get("stage") in STAGES and isinstance(value.get("digests"), dict)
          and all(isinstance(k, str) and isinstance(v, str) for k, v in value["digests"].items()))
    return value if ok else None


def first_difference(a: dict[tuple[int, str], dict[str, str]], b: dict[tuple[int, str], dict[str, str]]
                     ) -> Difference | None:
    """The earliest (step, stage, tensor) whose digests differ, or that one trace lacks."""
    keys = sorted(set(a) | set(b), key=lambda k: (k[0], STAGES.index(k[1])))
    for step, stage in keys:
        da, db = a.get((step, stage), {}), b.get((step, stage), {})
        for name in sorted(set(da) | set(db)):
            if da.get(name) != db.get(name):
                return Difference(step, stage, name, da.get(name), db.get(name))
    return None


def values_line(run_a: Path, run_b: Path, diff: Difference) -> str | None:
    """Where both runs saved the step's tensors whole: how the tensor's values differ (None: no dump)."""
    from soaklab.files.checkpoints import load_weights

    found = []
    for run in (run_a, run_b):
        paths = [run / TRACE_DIR / f"{side}-{diff.step}-{diff.stage}.pt" for side in SIDES]
        path = next((p for p in paths if p.is_file()), None)
        if path is None:
            return None
        found.append(load_weights(path).get(diff.name))
    ta, tb = found
    if ta is None or tb is None:
        return None
    if ta.shape != tb.shape or ta.dtype != tb.dtype:
        return f"  values: {tuple(ta.shape)} {ta.dtype} against {tuple(tb.shape)} {tb.dtype}"
    unequal = (ta != tb) & ~(ta.isnan() & tb.isnan()) if ta.is_floating_point() else ta != tb
    count = int(unequal.sum())
    if not count:
        return "  values: equal (the digests differ in bits a comparison does not show: -0.0 and 0.0, NaN payloads)"
    index = tuple(int(i) for i in unequal.nonzero()[0])
    gap = (ta.double() - tb.double()).abs().max() if ta.is_floating_point() else None
    return (f"  values: {count} of {ta.numel()} elements differ; the first at {list(index)}: {ta[index].item()!r} "
            f"and {tb[index].item()!r}" + (f"; max |A - B| = {float(gap):.3g}" if gap is not None else ""))
