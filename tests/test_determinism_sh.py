"""scripts/gpu/determinism.sh (the GPU machine's acceptance stages, docs/determinism.md): a stage or a
setting it does not know is refused in one line, exit 2, before the stage's folder under
/root/determinism is emptied, the assets pulled or the MPS daemon started. Only the refusals run here:
each exits before anything else (a regression would first fail on the missing wheel in tmp_path)."""

from __future__ import annotations

import os
import subprocess

from tests.conftest import REPO, one_line

SCRIPT = REPO / "scripts" / "gpu" / "determinism.sh"


def refused(tmp_path, stage: str, **env: str) -> str:
    """Run the script in an empty folder; its one line, after checking that it wrote nothing."""
    proc = subprocess.run(["bash", str(SCRIPT), stage], cwd=tmp_path, capture_output=True, text=True, check=False,
                          env={**os.environ, "OUT": str(tmp_path / "out"), **env}, timeout=60)
    assert (proc.returncode, proc.stdout) == (2, ""), (proc.returncode, proc.stdout, proc.stderr)
    assert not any(tmp_path.iterdir())  # nothing pulled, nothing packed
    return one_line(proc.stderr)


def test_an_unknown_stage_is_refused_before_its_folder_is_emptied(tmp_path):
    # work=/root/determinism/STAGE was removed before the name was checked: '..' removed /root
    assert refused(tmp_path, "no-such-stage") == ("determinism.sh: unknown stage 'no-such-stage' (warm, bits, "
                                                  "fresh, soak, cost, learning, record)")
