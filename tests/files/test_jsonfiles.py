"""JSON artifacts: written whole or not at all, readable as the user's umask says; read back only
within the reader's limits (size, nesting, duplicate keys), a file past them one exit-2 line."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from soaklab.files.jsonfiles import MAX_JSON_BYTES, JSONRefused, read_json, umask, write_json_atomic
from tests.conftest import REPO


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


def test_every_json_file_of_the_repository_reads_within_the_limits(tmp_path):
    """The records, benchmarks and schemas (the largest real artifacts, soak JSONs with their
    samples among them) read as json reads them; one level past the depth limit is refused."""
    files = subprocess.run(["git", "ls-files", "*.json"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    assert len(files) > 100
    for name in files:
        assert read_json(REPO / name) == json.loads((REPO / name).read_text()), name
    (tmp_path / "deep.json").write_text("[" * 64 + "]" * 64)
    assert read_json(tmp_path / "deep.json") == json.loads((tmp_path / "deep.json").read_text())
    (tmp_path / "deeper.json").write_text("[" * 65 + "]" * 65)
    with pytest.raises(JSONRefused, match="nested deeper than 64 levels"):
        read_json(tmp_path / "deeper.json")


def _sparse(path):
    with open(path, "wb") as fh:  # a hole: no disk used, the size past the limit
        fh.truncate(MAX_JSON_BYTES + 1)


@pytest.mark.parametrize(("write", "words"), [
    (lambda p: p.write_text("[" * 100_000 + "]" * 100_000), "nested deeper than 64 levels (MAX_JSON_DEPTH)"),
    (lambda p: p.write_text('{"record": "ci-dag", "verdict": "fail", "verdict": "pass"}'),
     "key 'verdict' appears twice in one object"),
    (_sparse, f"{MAX_JSON_BYTES + 1:,} bytes, over the {MAX_JSON_BYTES:,}-byte limit"),
    (lambda p: p.write_bytes(b'{"verdict": "\xff"}'), "not JSON"),
    # a FIFO blocked the reader in open() until a writer came: never, in a planted run dir
    (os.mkfifo, "not a regular file (a FIFO, a device or a directory)"),
    (lambda p: p.mkdir(), "not a regular file (a FIFO, a device or a directory)"),
])
def test_a_json_input_soaklab_did_not_write_is_one_exit_2_line(cli, tmp_path, write, words):
    """`record verdict` on a comparison file from outside: refused before it is read into anything."""
    path = tmp_path / "comparison.json"
    write(path)
    result = cli("record", "verdict", path, "--out", tmp_path / "verdict.txt")
    assert result.code == 2 and result.out == ""
    [line] = result.err.strip().splitlines()
    assert line.startswith(f"soaklab: error: {path}: ") and words in line, line
    assert not (tmp_path / "verdict.txt").exists()
