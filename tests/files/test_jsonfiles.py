"""JSON artifacts: written whole or not at all, readable as the user's umask says."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from soaklab.files.jsonfiles import umask, write_json_atomic


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_mode_follows_the_umask(tmp_path, mask):
    """In a child process with its own umask: the file's mode is what a plain open() would give."""
    code = ("import os, sys; from pathlib import Path; from soaklab.files.jsonfiles import write_json_atomic; "
            f"os.umask({mask}); write_json_atomic(Path(sys.argv[1]) / 'a.json', {{'x': 1}}); "
            "open(Path(sys.argv[1]) / 'plain.txt', 'w').close()")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True)
    mode = stat.S_IMODE(os.stat(tmp_path / "a.json").st_mode)
    assert mode == stat.S_IMODE(os.stat(tmp_path / "plain.txt").st_mode) == 0o666 & ~mask
    assert json.loads((tmp_path / "a.json").read_text()) == {"x": 1}


def test_umask_reads_without_changing_it():
    before = os.umask(0o027)
    try:
        assert umask() == 0o027
        assert umask() == 0o027
    finally:
        os.umask(before)


def test_a_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(TypeError):
        write_json_atomic(tmp_path / "b.json", {"x": object()})
    assert list(tmp_path.iterdir()) == []
