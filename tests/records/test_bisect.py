"""`soaklab record bisect`'s refusals, on real git repositories: each is one line and exit 2 before
any commit is reproduced (or, for a good commit that cannot be judged, after that commit alone), and
the user's working tree is left as it was. The search on real runs: tests/workflow/test_records.py."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO, one_line


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    """Three commits holding record ci-dag's spec and a Snakefile that fails at once (no commit of it
    can be reproduced), and an uncommitted edit the bisect must leave alone."""
    root = tmp_path / "repo"
    (root / "records").mkdir(parents=True)
    shutil.copytree(REPO / "records" / "ci-dag", root / "records" / "ci-dag", ignore=shutil.ignore_patterns("machines"))
    (root / "Snakefile").write_text("raise SystemExit('this commit does not run')\n")
    _git(root, "init", "-q", "-b", "main")
    for n in range(3):
        (root / "NOTES").write_text(f"{n}\n")
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", f"commit {n}")
    (root / "NOTES").write_text("uncommitted\n")
    return root


def _bisect(cli, monkeypatch, repo, *args):
    monkeypatch.chdir(repo)
    return cli("record", "bisect", "ci-dag", *args, "--python", sys.executable)


@pytest.mark.parametrize(("args", "words"), [
    (("--good", "nope", "--bad", "HEAD"), "--good=nope: not a commit of"),
    (("--good", "HEAD~2", "--bad", "HEAD^{tree}"), "--bad=HEAD^{tree}: not a commit of"),
    (("--good", "HEAD", "--bad", "HEAD"), "--good and --bad are one commit"),
    (("--good", "HEAD", "--bad", "HEAD~2"), "not on the first-parent line of --bad="),
])
def test_revisions_that_name_no_usable_range_are_refused(cli, monkeypatch, repo, args, words):
    result = _bisect(cli, monkeypatch, repo, *args)
    assert result.code == 2 and words in one_line(result.err)
    assert (repo / "NOTES").read_text() == "uncommitted\n"
    assert not (repo / ".soaklab" / "bisect").exists() or not any((repo / ".soaklab" / "bisect").rglob("*.log"))


def test_a_record_missing_at_the_bad_commit_and_a_bad_name_are_refused(cli, monkeypatch, repo):
    monkeypatch.chdir(repo)
    result = cli("record", "bisect", "no-such", "--good", "HEAD~2", "--bad", "HEAD", "--python", sys.executable)
    assert result.code == 2 and "record no-such: no records/no-such/record.yaml at --bad" in one_line(result.err)
    result = cli("record", "bisect", "../ci-dag", "--good", "HEAD~2", "--bad", "HEAD")
    assert result.code == 2 and "not a record name" in one_line(result.err)
    assert not list((repo / ".soaklab").rglob("*.log"))


def test_a_good_commit_that_cannot_be_judged_is_refused_and_nothing_else_runs(cli, monkeypatch, repo):
    """The good commit's workflow dies at once: no comparison, so it cannot be judged; the bad one is
    never started, no worktree is left, and the user's edit stands."""
    result = _bisect(cli, monkeypatch, repo, "--good", "HEAD~2", "--bad", "HEAD")
    good = _git(repo, "rev-parse", "HEAD~2")
    line = one_line(result.err)
    assert result.code == 2 and f"record ci-dag: --good {good[:7]} could not be judged (no comparison written" in line
    logs = list((repo / ".soaklab" / "bisect").rglob("*.log"))
    assert [p.name for p in logs] == [f"{good[:12]}.log"] and "this commit does not run" in logs[0].read_text()
    assert _git(repo, "worktree", "list").count("\n") == 0  # the repository's own tree only
    assert not any((logs[0].parent.parent / "worktrees").iterdir())
    # .soaklab/ ignores itself: the repository's status shows the user's edit and nothing of the bisect's
    assert (repo / "NOTES").read_text() == "uncommitted\n" and _git(repo, "status", "--short") == "M NOTES"
