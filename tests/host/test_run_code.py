"""The code a run runs (soaklab.host.run_code): a checkpoint's record is input from outside, so whatever a
weights_only load can build there (a tensor, whose `!=` and truth are a tensor's; a list nested past
the interpreter's recursion limit; a string of newlines) is said in one short line, never a traceback.
The resume's refusal itself, through the CLI on a real killed run, is tests/rl/test_resume.py's."""

from __future__ import annotations

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
