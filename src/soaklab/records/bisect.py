"""`soaklab record bisect NAME --good REV --bad REV`: the first commit at which a record's
reproduction changes (docs/records.md, "Bisect").

Each commit tried is checked out into a git worktree of its own under the repository's
`.soaklab/bisect/<record>-<good7>-<bad7>/`, never the user's working tree, and reproduced there as
`snakemake reproduce` does at that commit: that commit's Snakefile and package (its `src/` first on
the path), its interpreter, `--config reproduce=NAME`. The record it is compared with is the one at
the bad revision (what CI compared against), copied into every worktree. The comparison that commit
writes gives the verdict: `pass` reproduces (bit for bit for a cpu record; inside every band and
tolerance, over the spec's seeds, for a gpu one), `fail` does not; anything else (no environment,
no comparison, `not_comparable`, `incomplete`) skips the commit, as `git bisect skip` does.

The search is soaklab's own over the bad revision's first-parent line (soaklab.records.bisection),
not `git bisect`: its state is one JSON file written after every step, so a bisection stopped by
Ctrl-C or SIGTERM resumes from it when the same command runs again, and the user's checkout carries
no bisect state of git's (`git bisect` keeps its own in the repository and moves HEAD).

Environments: one per hash of what `make setup` reads (pyproject.toml, requirements/cpu.lock,
scripts/setup-venv.sh, as the Makefile's set-up stamp lists them), built by that commit's own
`make setup VENV=...` and reused by every commit with the same hash; `--python` names one
interpreter for every commit instead (CI: no environments built).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from hashlib import sha256
from pathlib import Path
from typing import Any

from soaklab.errors import InvalidInput, RuntimeFailure
from soaklab.files.jsonfiles import read_json, write_json_atomic
from soaklab.files.outpaths import check_out_file
from soaklab.records import bisection
from soaklab.records.bisection import BAD, GOOD, SKIP
from soaklab.records.plan import NAME, RecordError, load_record

STATE_DIR = Path(".soaklab") / "bisect"
# What `make setup` reads (the Makefile's $(STAMP) prerequisites): one environment per hash of them.
SETUP_INPUTS = ("pyproject.toml", "requirements/cpu.lock", "scripts/setup-venv.sh")
ASSET_CACHE = Path("resources") / "assets" / "cache"
STOP_GRACE_S = 30  # after SIGTERM, how long a step's Snakemake has to stop its jobs before SIGKILL


@dataclass(frozen=True)
class Request:
    record: str
    good: str  # revisions as typed
    bad: str
    python: Path | None  # one interpreter for every commit, else an environment per set-up hash
    cores: int
    snakemake_args: tuple[str, ...]
    out: Path | None = None  # the result JSON (checked before anything runs)
    retry_skipped: bool = False  # re-judge the candidates an earlier run skipped


@dataclass(frozen=True)
class Step:
    verdict: str  # good | bad | skip
    detail: str  # one line: the comparison's headline, or why the commit was skipped
    first_difference: dict[str, Any] | None
    failed: tuple[str, ...]  # the comparison's rows that did not pass, one line each
    log: str
    seconds: float

    def as_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "detail": self.detail, "first_difference": self.first_difference,
                "failed": list(self.failed), "log": self.log, "seconds": round(self.seconds, 1)}


def git(repo: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise RuntimeFailure(f"git {' '.join(args)}: {(proc.stderr.strip().splitlines() or ['failed'])[-1]}")
    return proc.stdout.strip()


def toplevel(where: Path) -> Path:
    proc = subprocess.run(["git", "-C", str(where), "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise InvalidInput(f"{where}: not in a git repository; record bisect runs in the soaklab checkout")
    return Path(proc.stdout.strip())


def resolve(repo: Path, flag: str, rev: str) -> str:
    """The commit a revision names (exit 2 when it names none)."""
    proc = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", "--end-of-options",
                           f"{rev}^{{commit}}"], capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not rev or rev.startswith("-"):
        raise InvalidInput(f"{flag}={rev}: not a commit of {repo} (git rev-parse --verify)")
    return proc.stdout.strip()


def first_parent_line(repo: Path, good: str, bad: str) -> list[str]:
    """good, then every commit of bad's first-parent line after it, bad last (exit 2 when good is not on it)."""
    if good == bad:
        raise InvalidInput(f"--good and --bad are one commit ({good[:7]}); nothing to bisect")
    after = git(repo, "rev-list", "--first-parent", "--reverse", f"{good}..{bad}").split()
    if not after or git(repo, "rev-parse", f"{after[0]}^1", check=False) != good:
        raise InvalidInput(f"--good={good[:7]}: not on the first-parent line of --bad={bad[:7]} "
                           f"(pick a good commit from `git log --first-parent {bad[:7]}`)")
    return [good, *after]


def subject(repo: Path, commit: str) -> str:
    return git(repo, "log", "-1", "--format=%s", commit)[:100]


def setup_hash(repo: Path, commit: str) -> str:
    """The hash of what `make setup` reads at `commit` (git's blob ids: no checkout needed)."""
    blobs = [git(repo, "rev-parse", "--verify", "--quiet", f"{commit}:{p}", check=False) or "-" for p in SETUP_INPUTS]
    return sha256(" ".join(blobs).encode()).hexdigest()[:16]


def require_record(repo: Path, commit: str, name: str) -> None:
    if git(repo, "cat-file", "-t", f"{commit}:records/{name}/record.yaml", check=False) != "blob":
        raise InvalidInput(f"record {name}: no records/{name}/record.yaml at --bad {commit[:7]}")


def extract_record(repo: Path, commit: str, name: str, dest: Path) -> Path:
    """records/<name> as it is at `commit`, written under `dest` (the archive's members filtered as
    untrusted data: no links out, no absolute paths)."""
    require_record(repo, commit, name)
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    archive = dest.parent / f".{dest.name}.tar"
    with open(archive, "wb") as out:
        subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", commit, f"records/{name}"], stdout=out,
                       check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    archive.unlink()
    folder = dest / "records" / name
    try:
        load_record(folder)
    except RecordError as exc:
        raise InvalidInput(f"--bad {commit[:7]}: {exc}") from None
    return folder


def how_judged(folder: Path) -> str:
    """The record's rule in one line: bits, or its seeds and each figure's band or tolerance."""
    record = load_record(folder)
    figures = ", ".join(f"{f.key} {f.rule} " + (f"band [{f.band[0]}, {f.band[1]}]" if f.band else
                                                f"tolerance {f.tolerance}{' (relative)' if f.relative else ''}")
                        for f in record.figures)
    bits = "bit for bit (every Train/ and Loss/ series, final weights, validation checks), and " if record.exact else ""
    return f"judged {bits}by its comparison over seeds {', '.join(str(r.seed) for r in record.runs)}: {figures}"


class Bisector:
    """One bisection: its state folder, worktrees and environments."""

    def __init__(self, repo: Path, request: Request, good: str, bad: str,
                 say: Callable[[str], None] = lambda line: print(line, flush=True)) -> None:
        self.repo, self.request, self.good, self.bad, self.say = repo, request, good, bad, say
        self.folder = repo / STATE_DIR / f"{request.record}-{good[:7]}-{bad[:7]}"
        self.state_file = self.folder / "state.json"
        self.worktrees = self.folder / "worktrees"
        self.logs = self.folder / "logs"
        self.envs = repo / STATE_DIR / "envs"

    @contextmanager
    def locked(self) -> Iterator[None]:
        """This bisection's folder, held by this process alone: a second run of the same range (another
        terminal, a CI retry) would remove the first's live worktree and write its skips into the state."""
        own = self.repo / STATE_DIR.parts[0]
        self.folder.mkdir(parents=True, exist_ok=True)
        if not (own / ".gitignore").is_file():  # ignored by any checkout's git status, whatever its .gitignore says
            (own / ".gitignore").write_text("*\n")
        with open(self.folder / "lock", "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.seek(0)
                holder = lock.read().strip() or "unknown"
                raise InvalidInput(f"record {self.request.record}: a bisection of {self.good[:7]}..{self.bad[:7]} "
                                   f"is running (pid {holder}, lock {self.folder / 'lock'}); wait for it or stop "
                                   "it") from None
            lock.seek(0)
            lock.truncate()
            lock.write(f"{os.getpid()}\n")
            lock.flush()
            yield  # the lock goes with the file's close (or the process's end)

    # -- worktrees and environments ------------------------------------------------------------

    def prune(self) -> None:
        """Remove the worktrees a stopped bisection left (its own folder's) and git's note of them."""
        if self.worktrees.is_dir():
            for stale in self.worktrees.iterdir():
                git(self.repo, "worktree", "remove", "--force", str(stale), check=False)
                shutil.rmtree(stale, ignore_errors=True)
        git(self.repo, "worktree", "prune", check=False)

    @contextmanager
    def worktree(self, commit: str) -> Iterator[Path]:
        path = self.worktrees / commit[:12]
        self.worktrees.mkdir(parents=True, exist_ok=True)
        git(self.repo, "worktree", "add", "--detach", "--force", str(path), commit)
        try:
            yield path
        finally:
            git(self.repo, "worktree", "remove", "--force", str(path), check=False)
            shutil.rmtree(path, ignore_errors=True)
            git(self.repo, "worktree", "prune", check=False)

    def interpreter(self, commit: str, tree: Path, log: Path) -> Path:
        """The commit's interpreter: --python, or the environment its own `make setup` builds (reused)."""
        if self.request.python is not None:
            return self.request.python
        env = self.envs / setup_hash(self.repo, commit)
        python = env / "bin" / "python"
        if (env / ".soaklab-installed").is_file() and python.is_file():
            return python
        self.say(f"  {commit[:7]}: building its environment ({env}, `make setup`)")
        env.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as out:
            code = self.run_quietly(["make", "-C", str(tree), "setup", f"VENV={env}"], tree, out, os.environ.copy())
        if code != 0 or not python.is_file():
            shutil.rmtree(env, ignore_errors=True)  # half built: the next commit of this hash builds it again
            raise StepSkipped(f"its environment did not build (`make setup`, exit {code})")
        return python

    def prepare(self, tree: Path, reference: Path) -> None:
        """The record of --bad in the worktree, and the repository's cached asset wheels (no download per step)."""
        target = tree / "records" / self.request.record
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(reference, target)
        cache = self.repo / ASSET_CACHE
        if cache.is_dir():
            (tree / ASSET_CACHE).mkdir(parents=True, exist_ok=True)
            for wheel in cache.glob("*.whl"):
                shutil.copy2(wheel, tree / ASSET_CACHE / wheel.name)

    # -- one step --------------------------------------------------------------------------------

    def run_quietly(self, command: list[str], cwd: Path, out: Any, env: dict[str, str]) -> int:
        """A command in its own process group, its output to `out`; on Ctrl-C or SIGTERM the group is
        stopped (SIGTERM, then SIGKILL after STOP_GRACE_S) before the interrupt goes on."""
        proc = subprocess.Popen(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        try:
            return proc.wait()
        except BaseException:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            with suppress(ProcessLookupError):  # anything of the group still there
                os.killpg(proc.pid, signal.SIGKILL)
            raise

    def reproduce(self, commit: str, reference: Path) -> Step:
        """The record reproduced at `commit`, in a worktree of its own, as `snakemake reproduce` does."""
        started = time.monotonic()
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"{commit[:12]}.log"
        log.write_text("")
        name = self.request.record
        with self.worktree(commit) as tree:
            try:
                python = self.interpreter(commit, tree, log)
            except StepSkipped as skipped:
                return Step(SKIP, str(skipped), None, (), str(log), time.monotonic() - started)
            self.prepare(tree, reference)
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(
                [str(tree / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]))
            command = [str(python), "-m", "snakemake", "reproduce", "--cores", str(self.request.cores),
                       "--config", f"reproduce={name}", *self.request.snakemake_args]
            with open(log, "a") as out:
                out.write(f"$ {' '.join(command)}  (in {tree})\n")
                out.flush()
                code = self.run_quietly(command, tree, out, env)
            return judged(tree / "results" / "reproduce" / name / "comparison.json", code, str(log),
                          time.monotonic() - started)

    # -- the search -------------------------------------------------------------------------------

    def run(self, commits: list[str]) -> dict[str, Any]:
        state = bisection.load(self.state_file, self.request.record, self.good, self.bad, commits)
        # A skip is no verdict on the commit, only on that run of it: the good and bad ends are judged
        # again on every new run (a transient failure there would otherwise refuse for good), and
        # with --retry-skipped every skipped candidate too.
        retried = [c for c, s in state["steps"].items() if s["verdict"] == SKIP
                   and (self.request.retry_skipped or c in (self.good, self.bad))]
        for commit in retried:
            del state["steps"][commit]
        resumed = bool(state["steps"])
        self.prune()
        reference = extract_record(self.repo, self.bad, self.request.record, self.folder / "reference")
        name = self.request.record
        self.say(f"bisect {name}: {len(commits) - 2} commit(s) between good {self.good[:7]} and bad {self.bad[:7]} "
                 f"(bad's first-parent line), about {bisection.bounds(commits, {}).steps_left} step(s); "
                 f"the record as at {self.bad[:7]}, {how_judged(reference)}")
        if resumed:
            kept = sum(s["verdict"] == SKIP for s in state["steps"].values())
            self.say(f"bisect {name}: resuming from {self.state_file} ({len(state['steps'])} commit(s) judged"
                     + (f", {kept} skipped candidate(s) kept: --retry-skipped judges them again" if kept else "")
                     + (f"; judging again {len(retried)} skipped in an earlier run" if retried else "") + ")")
        for commit, expected in ((self.good, GOOD), (self.bad, BAD)):
            step = self.judge(state, commit, reference, "good" if expected == GOOD else "bad")
            if step["verdict"] != expected:
                which = "--good" if expected == GOOD else "--bad"
                if step["verdict"] == SKIP:
                    why = f"could not be judged ({step['detail']}; log {step['log']})"
                elif expected == GOOD:
                    why = f"does not reproduce the record ({step['detail']}); pick an earlier good commit"
                else:
                    why = f"reproduces the record ({step['detail']}); nothing to bisect"
                raise InvalidInput(f"record {name}: {which} {commit[:7]} {why}")
        while True:
            bounds = bisection.bounds(commits, bisection.verdicts_of(state))
            index = bisection.next_index(bounds)
            if index is None:
                break
            self.say(f"bisect {name}: {len(bounds.untried)} commit(s) left to try between "
                     f"{commits[bounds.good][:7]} (good) and {commits[bounds.bad][:7]} (bad), about "
                     f"{bounds.steps_left} step(s) left")
            self.judge(state, commits[index], reference, "candidate")
        first, skipped = bisection.answer(commits, bisection.verdicts_of(state))
        found = state["steps"][first]
        result = {"record": name, "good": self.good, "bad": self.bad, "first_bad": first,
                  "subject": subject(self.repo, first), "skipped_before_it": skipped,
                  "first_difference": found.get("first_difference"), "failed": found.get("failed"),
                  "detail": found.get("detail"),
                  "steps": [{"commit": c, **s} for c, s in state["steps"].items()],
                  "skipped": [c for c, s in state["steps"].items() if s["verdict"] == SKIP],
                  "state": str(self.state_file)}
        state["result"] = result
        bisection.save(self.state_file, state)
        return result

    def judge(self, state: dict[str, Any], commit: str, reference: Path, role: str) -> dict[str, Any]:
        """A commit's step, from the state when judged before (a resumed bisection), else run now."""
        if commit in state["steps"]:
            return state["steps"][commit]
        self.say(f"  {role} {commit[:7]} {subject(self.repo, commit)!r}: reproducing")
        step = self.reproduce(commit, reference)
        state["steps"][commit] = step.as_json()
        bisection.save(self.state_file, state)
        said = {GOOD: "reproduces the record", BAD: "does not reproduce the record", SKIP: "skipped"}[step.verdict]
        self.say(f"  {commit[:7]}: {said} ({step.detail}) [{step.seconds:.0f} s]")
        return state["steps"][commit]


class StepSkipped(Exception):
    """A commit that cannot be judged: it did not build."""


def judged(comparison: Path, code: int, log: str, seconds: float) -> Step:
    """The verdict the commit's own comparison gives: pass (and the workflow exited 0) reproduces, fail
    does not; no comparison, or another verdict, skips the commit."""
    try:
        doc = read_json(comparison)
    except (OSError, ValueError) as exc:
        return Step(SKIP, f"no comparison written (the workflow exited {code}; {type(exc).__name__})", None, (),
                    log, seconds)
    verdict = doc.get("verdict") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or verdict not in ("pass", "fail"):
        reason = doc.get("reason") if isinstance(doc, dict) else None
        return Step(SKIP, f"comparison {verdict}{f': {reason}' if reason else ''}", None, (), log, seconds)
    first = doc.get("first_difference") if isinstance(doc.get("first_difference"), dict) else None
    failed = tuple(f"{row.get('name')}: {row.get('detail') or str(row.get('record')) + ' -> ' + str(row.get('now'))}"
                   for row in doc.get("figures") or [] if isinstance(row, dict) and row.get("verdict") == "fail")
    if verdict == "pass" and code != 0:
        return Step(SKIP, f"comparison pass, but the workflow exited {code}", None, (), log, seconds)
    headline = "pass" if verdict == "pass" else "fail" + (
        f": first difference {first['series']} at step {first['step']} ({first.get('run')})"
        if first and first.get("series") else f": {failed[0]}" if failed else "")
    return Step(GOOD if verdict == "pass" else BAD, headline, first, failed, log, seconds)


def check_out(repo: Path, out: Path) -> None:
    """--out: a JSON file of its own, outside what the bisection reads and keeps (the repository's
    tracked files, records/, .soaklab/), and not over a file that is not JSON (exit 2 before anything runs)."""
    check_out_file(out, ".json")
    real = Path(os.path.realpath(out))
    for kept, what in ((repo / "records", "the records folder"), (repo / STATE_DIR.parts[0], "the bisections' state")):
        base = Path(os.path.realpath(kept))
        if real == base or base in real.parents:
            raise InvalidInput(f"--out {out}: inside {what} ({base}); write the result elsewhere")
    root = Path(os.path.realpath(repo))
    if root in real.parents and git(repo, "ls-files", "--error-unmatch", "--", str(real.relative_to(root)),
                                    check=False):
        raise InvalidInput(f"--out {out}: a file git tracks in {repo}; write the result elsewhere")
    if real.exists():
        try:
            read_json(real)
        except (OSError, ValueError):
            raise InvalidInput(f"--out {out}: an existing file that is not JSON; choose another path") from None


def bisect(request: Request, where: Path, say: Callable[[str], None] = lambda line: print(line, flush=True)
           ) -> dict[str, Any]:
    """Check the request, then search (InvalidInput before anything runs for a bad one)."""
    if not NAME.match(request.record):
        raise InvalidInput(f"record {request.record!r}: not a record name (lower-case letters, digits and '-')")
    repo = toplevel(where)
    if request.python is not None:
        # Absolute, not resolved: each step runs in its worktree, and a venv's python is a symlink whose
        # target would lose the venv.
        request = replace(request, python=Path(os.path.abspath(where / request.python)))
        if not (request.python.is_file() and os.access(request.python, os.X_OK)):
            raise InvalidInput(f"--python={request.python}: not an executable interpreter")
    if request.cores < 1:
        raise InvalidInput(f"--cores={request.cores}: expected an integer >= 1")
    if request.out is not None:
        check_out(repo, where / request.out)
    good = resolve(repo, "--good", request.good)
    bad = resolve(repo, "--bad", request.bad)
    commits = first_parent_line(repo, good, bad)
    require_record(repo, bad, request.record)
    bisector = Bisector(repo, request, good, bad, say)
    with bisector.locked():  # nothing is written under .soaklab/ before this point
        # SIGTERM as Ctrl-C: the step's processes are stopped, the state stays, the worktree goes.
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            result = bisector.run(commits)
        except KeyboardInterrupt:
            bisector.prune()
            raise RuntimeFailure(f"record {request.record}: bisect interrupted; the verdicts so far are in "
                                 f"{bisector.state_file}: run the same command again to resume") from None
        finally:
            signal.signal(signal.SIGTERM, previous)
    if request.out is not None:
        write_json_atomic(where / request.out, result)
    return result


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt

