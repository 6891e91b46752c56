"""scripts/gpu/determinism.sh (the GPU machine's acceptance stages, docs/determinism.md): a stage or a
setting it does not know is refused in one line, exit 2, before the stage's folder under
/root/determinism is emptied, the assets pulled or the MPS daemon started. Only the refusals run here:
each exits before anything else (a regression would empty /root/determinism/STAGE, then fail on the
wheel missing from the test's checkout folder)."""

from __future__ import annotations

import os
import subprocess

from tests.conftest import REPO, one_line

SCRIPT = REPO / "scripts" / "gpu" / "determinism.sh"


def refused(tmp_path, stage: str, **env: str) -> str:
    """Run the script in an empty folder; its one line, after checking that it wrote nothing."""
    here = tmp_path / "checkout"
    here.mkdir(exist_ok=True)
    proc = subprocess.run(["bash", str(SCRIPT), stage], cwd=here, capture_output=True, text=True, check=False,
                          env={**os.environ, "OUT": str(tmp_path / "out"), **env}, timeout=60)
    assert (proc.returncode, proc.stdout) == (2, ""), (proc.returncode, proc.stdout, proc.stderr)
    assert not any(here.iterdir()) and not (tmp_path / "out").exists()  # nothing pulled, nothing packed
    return one_line(proc.stderr)


def test_an_unknown_stage_is_refused_before_its_folder_is_emptied(tmp_path):
    # work=/root/determinism/STAGE was removed before the name was checked: '..' removed /root
    assert refused(tmp_path, "no-such-stage") == ("determinism.sh: unknown stage 'no-such-stage' (warm, bits, "
                                                  "fresh, soak, cost, learning, record)")


def test_the_fresh_stage_refuses_its_runs_and_against_before_anything(tmp_path):
    # each was read only after the stage's folder was emptied and MPS started (FRESH_RUNS not at all:
    # its words became run dirs under the folder, '*' the names of the files where it ran)
    for runs in ("G", "F G H", "*", "../F"):
        assert refused(tmp_path, "fresh", FRESH_RUNS=runs) == (f"FRESH_RUNS='{runs}': expected F or 'F G' "
                                                               "(the runs' names are their folders)")
    elsewhere = tmp_path / "against"
    (elsewhere / "F").mkdir(parents=True)
    for against in ("no/such/F", str(elsewhere / "F")):  # relative to the checkout, or absolute
        assert refused(tmp_path, "fresh", AGAINST=against) == (f"AGAINST={against}: no trace/ there (an earlier "
                                                               "visit's packed F)")
