"""A record's history over commits (docs/records.md, "History"): every set of artifacts of record and
every kept reproduction the repository ever stored for it (git's history of records/<name>/, and the
working tree's files not yet committed), and the comparisons CI hands it, as points: commit, date,
machine kind and each figure (a set's figures the median over its seeds for a timing, the mean for a
learning figure, as the comparison takes them). Machine kinds that cannot be compared are kept apart:
each has its own series, its own bands and its own regression verdict (soaklab.records.regression).
"""

from __future__ import annotations

import hashlib
import json
import statistics
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from soaklab.errors import InvalidInput
from soaklab.records import regression
from soaklab.records.plan import MACHINES, PROVENANCE, RULE_OF, RUNS, SNAPSHOT, SPEC, Record

# Where the pages are committed (the README's records table links them).
HISTORY_DIR = Path("docs") / "records" / "history"
REPRODUCED = "reproduced.json"  # soaklab.records.store.REPRODUCED, without store's imports
LOG_LINES = 15  # commits of `git log --oneline` shown between two points


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)


def blob_id(data: bytes) -> str:
    """git's id of a blob with these bytes: a file on disk and its committed copy dedupe as one."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Blobs:
    """Blob contents by id through one `git cat-file --batch`, each parsed once."""

    def __init__(self, repo: Path) -> None:
        self.proc = subprocess.Popen(["git", "-C", str(repo), "cat-file", "--batch"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)
        self.cache: dict[str, Any] = {}

    def json(self, blob: str) -> Any:
        if blob not in self.cache:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(f"{blob}\n".encode())
            self.proc.stdin.flush()
            header = self.proc.stdout.readline().split()
            data = self.proc.stdout.read(int(header[2])) if len(header) == 3 else b""
            self.proc.stdout.read(1)  # the newline after the contents
            try:
                self.cache[blob] = json.loads(data)
            except ValueError:
                self.cache[blob] = None
        return self.cache[blob]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def run_key(spec_text: str | bytes | None) -> str:
    """What a point measured: the spec's run: and seeds:, hashed (a comment or a figure added leaves it)."""
    try:
        spec = yaml.safe_load(spec_text) if spec_text else None
    except yaml.YAMLError:
        spec = None
    if not isinstance(spec, dict):
        return "unknown"
    text = json.dumps({"run": spec.get("run"), "seeds": spec.get("seeds")}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _aggregate(snaps: list[dict[str, Any]]) -> dict[str, float]:
    """Each figure over the seeds: the median of a timing (rule ratio), the mean of a learning figure."""
    keys = dict.fromkeys(k for s in snaps for k in (s.get("figures") or {}))
    out = {}
    for key in keys:
        values = [s["figures"][key] for s in snaps if isinstance((s.get("figures") or {}).get(key), int | float)]
        if len(values) == len(snaps) and values:
            rule = RULE_OF.get(key.split("@")[0], "ratio")
            out[key] = float(statistics.median(values) if rule == "ratio" else statistics.fmean(values))
    return out


def _bits(rows: list[Any]) -> str | None:
    exact = [r for r in rows if isinstance(r, dict) and r.get("rule") == "exact"]
    if not exact:
        return None
    verdicts = {r.get("verdict") for r in exact}
    if verdicts == {"not_comparable"} and all(isinstance(r.get("held"), bool) for r in exact):
        # measured on another kind and not judged (compare's `held`): whether they held all the same
        return ("equal" if all(r["held"] for r in exact) else "differ") + ", not judged"
    return "equal" if verdicts == {"pass"} else "differ" if "fail" in verdicts else "not judged"


def _row_figures(rows: list[Any]) -> dict[str, float]:
    return {str(r["name"]): float(r["now"]) for r in rows if isinstance(r, dict) and r.get("rule") != "exact"
            and isinstance(r.get("now"), int | float) and not isinstance(r.get("now"), bool)}


def set_point(provenance: dict[str, Any], snaps: list[dict[str, Any]], run: str, stored: str) -> dict[str, Any]:
    return {"source": "set", "commit": provenance.get("commit"), "dirty": provenance.get("dirty"),
            "date": provenance.get("date"), "machine": provenance.get("machine_kind"), "run": run,
            "figures": _aggregate(snaps), "bits": None, "stored": stored}


def kept_point(kept: dict[str, Any], run: str, stored: str) -> dict[str, Any]:
    rows = kept.get("figures") or []
    return {"source": "kept", "commit": kept.get("commit"), "dirty": kept.get("dirty"), "date": kept.get("date"),
            "machine": kept.get("machine"), "run": run, "figures": _row_figures(rows), "bits": _bits(rows),
            "stored": stored}


def comparison_point(comparison: dict[str, Any], run: str, stored: str) -> dict[str, Any]:
    """A reproduction that was not kept (CI's): its side `now`."""
    rows = comparison.get("figures") or []
    return {"source": "ci", "commit": (comparison.get("commit") or {}).get("now"),
            "dirty": (comparison.get("dirty") or {}).get("now"), "date": comparison.get("date"),
            "machine": (comparison.get("machine") or {}).get("now"), "run": run, "figures": _row_figures(rows),
            "bits": _bits(rows), "verdict": comparison.get("verdict"), "stored": stored}


def _versions(repo: Path, name: str) -> Iterator[tuple[str, dict[str, str]]]:
    """Each commit that changed records/<name>/ (oldest first) and the blob of every file it held there."""
    log = _git(repo, "log", "--reverse", "--format=%H", "--", f"records/{name}")
    for commit in log.stdout.split():
        listing = _git(repo, "ls-tree", "-r", commit, "--", f"records/{name}/").stdout
        files = {}
        for line in listing.splitlines():
            meta, _, path = line.partition("\t")
            parts = meta.split()
            if len(parts) == 3 and parts[1] == "blob":
                files[path[len(f"records/{name}/"):]] = parts[2]
        yield commit, files


def _points_of(files: dict[str, str], read: Any, stored: str, seen: set[str]) -> list[dict[str, Any]]:
    """The points one version of a record folder holds (`files`: relative path -> blob id), new ones only."""
    run = run_key(read(files[SPEC], raw=True)) if SPEC in files else "unknown"
    points = []
    kinds = sorted({p.split("/")[1] for p in files if p.startswith(f"{MACHINES}/") and p.count("/") >= 2})
    for kind in kinds:
        base = f"{MACHINES}/{kind}/"
        provenance_blob = files.get(base + PROVENANCE)
        if provenance_blob and provenance_blob not in seen:
            snaps = [read(blob) for path, blob in sorted(files.items())
                     if path.startswith(base + RUNS + "/") and path.endswith("/" + SNAPSHOT)]
            provenance = read(provenance_blob)
            if isinstance(provenance, dict) and snaps and all(isinstance(s, dict) for s in snaps):
                seen.add(provenance_blob)
                points.append(set_point(provenance, snaps, run, stored))
        kept_blob = files.get(base + REPRODUCED)
        if kept_blob and kept_blob not in seen:
            kept = read(kept_blob)
            if isinstance(kept, dict):
                seen.add(kept_blob)
                points.append(kept_point(kept, run, stored))
    return points


def _stored_points(repo: Path, name: str, seen: set[str]) -> list[dict[str, Any]]:
    """The points git's history of records/<name>/ holds, oldest first."""
    points: list[dict[str, Any]] = []
    blobs = Blobs(repo)
    try:
        def read_blob(blob: str, raw: bool = False) -> Any:
            if raw:
                return _git(repo, "cat-file", "blob", blob).stdout
            return blobs.json(blob)

        for commit, files in _versions(repo, name):
            points += _points_of(files, read_blob, f"git {commit[:10]}", seen)
    finally:
        blobs.close()
    return points


def gather(repo: Path | None, record: Record, comparisons: list[tuple[dict[str, Any], str]]) -> list[dict[str, Any]]:
    """Every point of the record, in time order: git's history of its folder, then the working tree's
    files not yet committed, then the comparisons given (CI's). Without a repository (None): the
    working tree's points only."""
    seen: set[str] = set()
    points: list[dict[str, Any]] = []
    if repo is not None:
        points += _stored_points(repo, record.name, seen)
    tree: dict[str, bytes] = {str(p.relative_to(record.folder)): p.read_bytes()
                              for p in sorted(record.folder.rglob("*.json")) if p.is_file()}
    spec = (record.folder / SPEC).read_bytes()
    tree[SPEC] = spec
    ids = {path: blob_id(data) for path, data in tree.items()}
    by_id = {ids[path]: tree[path] for path in tree}

    def read_tree(blob: str, raw: bool = False) -> Any:
        if raw:
            return by_id[blob]
        try:
            return json.loads(by_id[blob])
        except ValueError:
            return None

    points += _points_of(ids, read_tree, "working tree", seen)
    given = set()
    for comparison, stored in comparisons:
        point = comparison_point(comparison, run_key(spec), stored)
        # One reproduction is one point, however often it is given: a run may not supply its own lookback.
        key = (point["commit"], point["date"], point["machine"])
        if key not in given:
            given.add(key)
            points.append(point)
    return sorted(points, key=lambda p: str(p.get("date") or ""))


def git_log(repo: Path | None, older: str | None, newer: str | None) -> dict[str, Any]:
    """`git log --oneline` from one point's commit to the next's (the first LOG_LINES), or why not."""
    entry: dict[str, Any] = {"from": older, "to": newer, "lines": [], "more": 0, "note": None}
    if repo is None:
        entry["note"] = "no git repository here"
        return entry
    if not older or not newer or older == newer:
        entry["note"] = "the same commit" if older == newer and older else "a commit is not named"
        return entry
    for commit in (older, newer):
        if _git(repo, "cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
            entry["note"] = f"{commit[:10]} is not in this repository (a machine's own checkout)"
            return entry
    if _git(repo, "merge-base", "--is-ancestor", older, newer).returncode != 0:
        entry["note"] = f"{older[:10]} is not an ancestor of {newer[:10]}"
        return entry
    lines = _git(repo, "log", "--oneline", "--no-decorate", "--abbrev=10", f"{older}..{newer}").stdout.splitlines()
    entry["lines"], entry["more"] = [line[:140] for line in lines[:LOG_LINES]], max(0, len(lines) - LOG_LINES)
    return entry


def verdicts(record: Record, points: list[dict[str, Any]]) -> dict[str, Any]:
    """The regression verdict of each band-judged figure, per machine kind, on the newest point's run."""
    out: dict[str, Any] = {}
    for kind in dict.fromkeys(str(p.get("machine")) for p in points):
        mine = [p for p in points if str(p.get("machine")) == kind]
        run = mine[-1]["run"]
        figures = {}
        for figure in record.figures:
            if figure.rule != "ratio" or figure.band is None:
                continue
            values = [p["figures"][figure.key] for p in mine if p["run"] == run and figure.key in p["figures"]]
            figures[figure.key] = regression.judge(values, figure.key, figure.band, figure.noisy).as_json()
        out[kind] = {"verdict": regression.overall([v["verdict"] for v in figures.values()]), "figures": figures}
    return out


def history(repo: Path | None, record: Record, comparisons: list[tuple[dict[str, Any], str]]) -> dict[str, Any]:
    """The record's history document: its points, the git log between them, and the verdicts."""
    points = gather(repo, record, comparisons)
    commits = list(dict.fromkeys(p.get("commit") for p in points if p.get("commit")))
    by_kind = verdicts(record, points)
    return {
        "record": record.name,
        # as of its newest point, not the clock: a page changes only when its history does
        "as_of": max((str(p["date"]) for p in points if p.get("date")), default=None),
        "figures": [{"key": f.key, "rule": f.rule, "band": list(f.band) if f.band else None,
                     "tolerance": f.tolerance, "relative": f.relative, "noisy": f.noisy} for f in record.figures],
        "points": points,
        "log": [git_log(repo, a, b) for a, b in zip(commits, commits[1:], strict=False)],
        "regression": {"rule": regression.RULE,
                       "verdict": regression.overall([f["verdict"] for v in by_kind.values()
                                                      for f in v["figures"].values()]),
                       "machines": by_kind},
    }


def read_comparisons(paths: list[Path]) -> list[tuple[dict[str, Any], str]]:
    """Comparisons handed to the history (CI's), each verdict recomputed from its rows (exit 2 if not)."""
    from soaklab.records.outcome import read_comparison

    out = []
    for path in paths:
        comparison = read_comparison(path)
        if comparison["verdict"] == "incomplete":
            raise InvalidInput(f"{path}: verdict incomplete: a reproduction that stopped has no figures to add")
        out.append((comparison, str(path)))
    return out


def check_record_of(comparisons: list[tuple[dict[str, Any], str]], record: Record) -> None:
    """Each comparison is of this record, on a machine of its class (cpu or gpu): a cpu-labelled point
    would join a gpu record's history as a machine kind of its own."""
    for comparison, path in comparisons:
        if comparison.get("record") != record.name:
            raise InvalidInput(f"{path}: a comparison of record {comparison.get('record')!r}, not {record.name}")
        machine = str((comparison.get("machine") or {}).get("now") or "")
        if machine.partition(":")[0] != record.machine:
            raise InvalidInput(f"{path}: a comparison on machine {machine!r}, not a {record.machine} machine as "
                               f"record {record.name} is")
