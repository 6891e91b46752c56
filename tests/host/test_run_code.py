"""The code a run runs (soaklab.host.run_code): a checkpoint's record is input from outside, so whatever a
weights_only load can build there (a tensor, whose `!=` and truth are a tensor's; a list nested past
the interpreter's recursion limit; a string of newlines) is said in one short line, never a traceback.
The resume's refusal itself, through the CLI on a real killed run, is tests/rl/test_resume.py's."""

from __future__ import annotations

import os
import subprocess
import sys

import torch

from soaklab.host.run_code import code_change, made_at

NOW = {"sources_sha256": "sha256:" + "a" * 64, "versions": {"python": "3.11.7", "torch": "2.13.0+cpu"},
       "commit": "f" * 40, "dirty": False}


def _deep(depth: int) -> list:
    nested: list = []
    for _ in range(depth):
        nested = [nested]
    return nested


def test_a_crafted_record_is_said_in_one_short_line():
    deep = _deep(100_000)  # a pickle's APPEND ops build this; its repr raises RecursionError
    for saved in ({**NOW, "sources_sha256": torch.zeros(3), "versions": {"python": torch.zeros(2, 2)}},
                  {**NOW, "sources_sha256": deep, "versions": {"python": deep, "torch": {"x": deep}}},
                  {**NOW, "sources_sha256": "sha256:\n\r\u2028" + "x" * 1_000_000, "versions": {"torch": b"2\n"}}):
        change = code_change(saved, NOW)
        assert change is not None and "\n" not in change and len(change) < 400, change
        assert change.startswith("the training sources were ") and "python was " in change
    said = code_change({**NOW, "sources_sha256": deep, "versions": {}}, NOW)
    assert said is not None and said.startswith("the training sources were a list, now sha256:aaaa")
    # A tensor's truth is ambiguous: "dirty" says local changes only when it is True itself.
    assert made_at({**NOW, "dirty": torch.ones(4), "commit": "ab\ncd"}) == "commit ab cd"
    assert made_at({**NOW, "dirty": True}) == f"commit {'f' * 19}..., with local changes"
    assert made_at({**NOW, "commit": deep}) == "an unknown commit"


def test_only_the_same_record_is_the_same_code():
    assert code_change(dict(NOW), NOW) is None
    assert code_change({**NOW, "versions": {**NOW["versions"], "extra": "1"}}, NOW) is None  # only ours compared
    assert code_change({**NOW, "versions": []}, NOW).startswith("it records no code (made by a soaklab older")
    none_now = {**NOW, "versions": {"python": "3.11.7", "warp": None}}  # a library this run lacks
    assert code_change({**NOW, "versions": {"python": "3.11.7"}}, none_now) is None
    assert code_change({**NOW, "versions": {"python": "3.11.7", "warp": torch.zeros(2)}}, none_now) == (
        "warp was a Tensor, now None")


def test_a_plugins_digest_reads_only_the_files_an_import_can_load(tmp_path):
    """A plug-in's whole package is the run's code; an editor's lock file beside its modules (Emacs'
    `.#env.py`, a dangling link), a FIFO or a folder named *.py is none of it: no traceback, no hang,
    the same digest."""
    from tests.catalogue.test_plugins import PLUGIN, install

    env = install(tmp_path / "site", PLUGIN)
    ask = ("from soaklab.host.run_code import _plugin_files, sources_sha256\n"
           "print([n for n, _ in _plugin_files('twin_sac', 'point_reach', 'mujoco')])\n"
           "print(sources_sha256('twin_sac', 'point_reach', 'mujoco'))\n")

    def digest() -> str:
        done = subprocess.run([sys.executable, "-c", ask], env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    clean = digest()
    assert "soaklab_dummy/point_reach/env.py" in clean
    package = tmp_path / "site" / "soaklab_dummy"
    (package / "point_reach" / ".#env.py").symlink_to("user@host.1234:1700000000")
    os.mkfifo(package / "fifo.py")
    (package / "folder.py").mkdir()
    assert digest() == clean
