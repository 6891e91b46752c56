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
    assert (repo / "NOTES").read_text() == "uncommitted\n" and not (repo / ".soaklab").exists()


def test_a_record_missing_at_the_bad_commit_and_a_bad_name_are_refused(cli, monkeypatch, repo):
    monkeypatch.chdir(repo)
    result = cli("record", "bisect", "no-such", "--good", "HEAD~2", "--bad", "HEAD", "--python", sys.executable)
    assert result.code == 2 and "record no-such: no records/no-such/record.yaml at --bad" in one_line(result.err)
    result = cli("record", "bisect", "../ci-dag", "--good", "HEAD~2", "--bad", "HEAD")
    assert result.code == 2 and "not a record name" in one_line(result.err)
    assert not (repo / ".soaklab").exists()


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


@pytest.mark.parametrize(("out", "words"), [
    ("records/ci-dag/record.yaml", "must end in .json"),
    ("records/result.json", "inside the records folder"),
    (".soaklab/bisect/result.json", "inside the bisections' state"),
    ("tracked.json", "a file git tracks in"),
    ("notes.json", "an existing file that is not JSON"),
])
def test_an_out_over_what_the_bisection_reads_or_keeps_is_refused_before_anything_runs(cli, monkeypatch, repo, out,
                                                                                        words):
    (repo / "tracked.json").write_text("{}\n")
    _git(repo, "add", "tracked.json")
    _git(repo, "commit", "-q", "-m", "a tracked JSON file")
    (repo / ".soaklab" / "bisect").mkdir(parents=True)
    (repo / "notes.json").write_text("not json\n")
    before = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts}
    result = _bisect(cli, monkeypatch, repo, "--good", "HEAD~2", "--bad", "HEAD", "--out", out)
    assert result.code == 2 and f"--out {repo / out}: {words}" in one_line(result.err)
    assert {p: p.read_bytes() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts} == before


def test_a_second_bisection_of_the_same_range_is_refused_while_the_first_holds_it(cli, monkeypatch, repo):
    """The lock is the first run's: the second exits at once naming its pid, and removes nothing."""
    good, bad = _git(repo, "rev-parse", "HEAD~2"), _git(repo, "rev-parse", "HEAD")
    folder = repo / ".soaklab" / "bisect" / f"ci-dag-{good[:7]}-{bad[:7]}"
    (folder / "worktrees" / "live").mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\n"
                               f"f = open({str(folder / 'lock')!r}, 'w'); fcntl.flock(f, fcntl.LOCK_EX)\n"
                               "f.write('4242\\n'); f.flush(); print('held', flush=True); sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        result = _bisect(cli, monkeypatch, repo, "--good", "HEAD~2", "--bad", "HEAD")
    finally:
        holder.stdin.close()
        holder.wait()
    assert result.code == 2 and (f"record ci-dag: a bisection of {good[:7]}..{bad[:7]} is running (pid 4242"
                                 in one_line(result.err))
    assert (folder / "worktrees" / "live").is_dir() and not (folder / "logs").exists()


def test_a_relative_python_runs_and_an_end_skipped_before_is_judged_again(cli, monkeypatch, repo):
    """--python ./py (relative to where the command runs, not the worktree) reaches the commit's
    workflow; the good commit it could not judge is judged again by the next run, not refused from the
    state."""
    (repo / "py").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    (repo / "py").chmod(0o755)
    monkeypatch.chdir(repo)
    good = _git(repo, "rev-parse", "HEAD~2")
    for _ in range(2):
        result = cli("record", "bisect", "ci-dag", "--good", "HEAD~2", "--bad", "HEAD", "--python", "./py")
        assert result.code == 2 and f"--good {good[:7]} could not be judged (no comparison" in one_line(result.err)
        assert f"good {good[:7]} 'commit 0': reproducing" in result.out
    assert "this commit does not run" in next((repo / ".soaklab" / "bisect").rglob("*.log")).read_text()


def test_a_skipped_candidate_stays_skipped_on_resume_and_retry_skipped_judges_it_again(cli, monkeypatch, repo):
    """A state whose ends were judged and whose middle commit was skipped (its run left no comparison):
    resumed, it answers from the state and says how to retry; with --retry-skipped the middle commit is
    reproduced again (its workflow still dies: skipped again, named beside the answer)."""
    from soaklab.records.bisect import Step
    from soaklab.records.bisection import new_state, save

    good, middle, bad = _git(repo, "rev-list", "--reverse", "HEAD").split()
    state = new_state("ci-dag", good, bad, [good, middle, bad])
    for commit, verdict in ((good, "good"), (middle, "skip"), (bad, "bad")):
        state["steps"][commit] = Step(verdict, "made by the test", None, (), "-", 0.0).as_json()
    save(repo / ".soaklab" / "bisect" / f"ci-dag-{good[:7]}-{bad[:7]}" / "state.json", state)
    result = _bisect(cli, monkeypatch, repo, "--good", "HEAD~2", "--bad", "HEAD")
    assert result.code == 0, result.err
    assert "1 skipped candidate(s) kept: --retry-skipped judges them again" in result.out
    assert "reproducing" not in result.out
    assert f"or one of the skipped commits before it: {middle[:7]}" in result.out
    result = _bisect(cli, monkeypatch, repo, "--good", "HEAD~2", "--bad", "HEAD", "--retry-skipped")
    assert result.code == 0, result.err
    # the search's loop says what is left before it reproduces a candidate
    assert (f"bisect ci-dag: 1 commit(s) left to try between {good[:7]} (good) and {bad[:7]} (bad), "
            "about 1 step(s) left") in result.out
    assert f"candidate {middle[:7]} 'commit 1': reproducing" in result.out
    assert f"{middle[:7]}: skipped (no comparison written" in result.out
    assert f"or one of the skipped commits before it: {middle[:7]}" in result.out
    assert (repo / "NOTES").read_text() == "uncommitted\n" and _git(repo, "worktree", "list").count("\n") == 0
