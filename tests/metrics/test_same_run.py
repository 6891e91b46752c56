"""`python -m soaklab.metrics.same_run A B` on two real cart-pole runs of one config (the same bits on
the CPU), on a copy with one Train/ row cut out, and on a dir that holds no run."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import one_line


def same_run(a: Path, b: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "soaklab.metrics.same_run", str(a), str(b)],
                          capture_output=True, text=True, timeout=120)


def test_same_run_says_same_or_names_the_first_difference(start_train, tmp_path):
    from tensorboard.compat.proto.event_pb2 import Event

    from soaklab.metrics.events import frame_records, record_bodies

    runs = [start_train("algo.max_iterations=12", name=name) for name in ("a", "b")]
    for run in runs:
        assert run.wait() == 0, run.output()
    a, b = (run.run_dir for run in runs)
    done = same_run(a, b)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "same", "")

    cut = tmp_path / "cut"
    shutil.copytree(b, cut)
    event_file = next(cut.glob("events.out.tfevents.*"))

    def dropped(body: bytes) -> bool:
        event = Event.FromString(body)
        return event.step == 7 and any(v.tag == "Train/step_reward" for v in event.summary.value)

    event_file.write_bytes(frame_records(body for body in record_bodies(event_file) if not dropped(body)))
    done = same_run(a, cut)
    assert done.returncode == 1, done.stderr
    assert done.stdout.strip() == f"{a} and {cut} differ: Train/step_reward differs from step 7 (12 and 11 points)"

    empty = tmp_path / "empty"
    empty.mkdir()
    done = same_run(a, empty)
    assert done.returncode == 2 and done.stdout == ""
    assert one_line(done.stderr) == f"same_run: {empty}: no TensorBoard event file (events.out.tfevents.*)"
