"""The support matrix: the committed one is what the generator writes; each level follows from the
evidence in a copy of the repository (kept reproductions, stale ones, thresholds, long soaks); a
kept reproduction is only a passing, current one; a false `covers` marker fails its test."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from soaklab.records import store
from soaklab.records.compare import compare
from soaklab.support import inventory
from soaklab.support.figures import README
from soaklab.support.matrix import JSON_OUT, MARKDOWN, generate, outputs, record_cell
from tests.conftest import REPO

G1_CPU = "flashsac/g1_motion_tracking/mujoco/cpu/1"


def artifacts(root: Path, name: str) -> Path:
    """The record's first machine kind's artifacts of record (the committed records have one or more)."""
    return store.load(root / "records", name).artifact_sets()[0]


# A configuration's refusal is compose and resolve on its reference host: a function of the
# configuration and the package's own defaults, which these tests never edit (they edit records, docs
# and tests). Worked out once per configuration per worker, not in every generate() (48 composes,
# some 4 s of each of this module's 30 generate() calls); every other fact is read afresh each time.
_REFUSAL = functools.cache(inventory.refusal)


@pytest.fixture(autouse=True)
def refusals_once(monkeypatch):
    monkeypatch.setattr(inventory, "refusal", _REFUSAL)


@pytest.fixture
def soaklab(cli, monkeypatch):
    """`soaklab ARGS` from `cwd` through the real entry point, in this process (tests/conftest.py's
    cli), where refusals_once holds: a fresh process would compose every configuration again."""

    def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
        monkeypatch.chdir(cwd)
        result = cli(*args)
        return subprocess.CompletedProcess(args, result.code, result.out, result.err)

    return run


@pytest.fixture
def repo(tmp_path) -> Path:
    """What the generator reads, in a scratch folder: the code, tests and configs linked, the
    records and docs copied (the tests edit them)."""
    root = tmp_path / "repo"
    root.mkdir()
    for name in ("src", "tests", "config", ".test", "workflow"):
        (root / name).symlink_to(REPO / name)
    shutil.copytree(REPO / "records", root / "records")
    (root / "docs").mkdir()
    for rel in (MARKDOWN, JSON_OUT, README):
        shutil.copyfile(REPO / rel, root / rel)
    (root / "docs" / "records").symlink_to(REPO / "docs" / "records")  # the history pages the README links
    return root


def level(root: Path, key: str) -> tuple[str, dict | None, tuple[str, ...]]:
    row = next(r for r in generate(root) if r.evidence.combination.key == key)
    return row.level, row.benchmarked_by, row.reasons


def self_comparison(root: Path, name: str) -> dict:
    """A real comparison of the record with its own runs of record: a reproduction that passes."""
    record = store.load(root / "records", name)
    provenance, recorded = store.read_recorded(record, json.loads((artifacts(root, name) / "provenance.json")
                                                                  .read_text())["machine_kind"])
    comparison = compare(record, provenance, recorded, json.loads(json.dumps(recorded)))
    comparison["date"] = "2026-12-01T00:00:00+00:00"
    return comparison


def test_the_committed_matrix_is_the_generated_one(soaklab):
    done = soaklab("support-matrix", "--check", cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (REPO / MARKDOWN).read_text() == outputs(REPO)[MARKDOWN]


def test_check_prints_the_difference_and_exits_1(repo, soaklab):
    text = (repo / MARKDOWN).read_text().replace("**Refused**", "**Recommended**", 1)
    (repo / MARKDOWN).write_text(text)
    done = soaklab("support-matrix", "--check", cwd=repo)
    assert done.returncode == 1
    assert "+| " in done.stdout and "**Refused**" in done.stdout and "support-matrix" in done.stderr
    assert (repo / MARKDOWN).read_text() == text  # --check writes nothing
    assert soaklab("support-matrix", cwd=repo).returncode == 0
    assert soaklab("support-matrix", "--check", cwd=repo).returncode == 0


def test_levels_follow_the_evidence(repo):
    # CI runs it (the CI DAG and the cpu records): Tested, with no kept reproduction yet.
    for reproduced in (repo / "records").rglob(store.REPRODUCED):
        reproduced.unlink()
    found, by, reasons = level(repo, G1_CPU)
    assert found == "Tested" and by is None and any("no kept reproduction" in r for r in reasons)
    # mjwarp on a cpu learner: the contract's own line.
    found, _, reasons = level(repo, "sac/g1_motion_tracking/mjwarp/cpu/1")
    assert found == "Refused" and "training.device" in reasons[0]
    # A configuration only a GPU-machine test trains is not Tested (CI has no GPU).
    assert level(repo, "flashsac/g1_motion_tracking/mjwarp/cuda/1")[0] == "Configured"

    # A passing reproduction kept: Benchmarked, with its date, commit and machine.
    comparison = self_comparison(repo, "ci-dag")
    store.keep(repo / "records", "ci-dag", comparison)
    found, by, reasons = level(repo, G1_CPU)
    assert found == "Benchmarked"
    assert by["record"] == "ci-dag" and by["date"].startswith("2026-12-01") and by["machine"].startswith("cpu")
    assert any("no learning threshold" in r for r in reasons)

    # A new record makes the kept reproduction stale: back to Tested.
    provenance = artifacts(repo, "ci-dag") / "provenance.json"
    fresh = json.loads(provenance.read_text()) | {"date": "2026-12-02T00:00:00+00:00"}
    provenance.write_text(json.dumps(fresh))
    found, _, reasons = level(repo, G1_CPU)
    assert found == "Tested" and any("earlier record" in r for r in reasons)


def test_recommended_needs_a_threshold_met_and_a_long_clean_soak(repo):
    for reproduced in (repo / "records").rglob(store.REPRODUCED):
        reproduced.unlink()
    folder = repo / "records" / "ci-dag"
    spec = yaml.safe_load((folder / "record.yaml").read_text())
    spec["thresholds"] = [{"name": "mean_reward", "at_env_steps": 480, "min": 0.1}]
    (folder / "record.yaml").write_text(yaml.safe_dump(spec))
    snapshot_path = artifacts(repo, "ci-dag") / "runs" / "seed1" / "snapshot.json"
    snap = json.loads(snapshot_path.read_text())
    assert snap["soak"]["duration_s"] < 1800
    store.keep(repo / "records", "ci-dag", self_comparison(repo, "ci-dag"))
    found, _, reasons = level(repo, G1_CPU)
    assert found == "Benchmarked" and any("Recommended needs >= 1800 s" in r for r in reasons)
    # A snapshot edited to a 30-minute clean soak that its soak summary does not show: no credit.
    snap["soak"] |= {"duration_s": 1800.0, "leak_status": "clean"}
    snapshot_path.write_text(json.dumps(snap))
    found, _, reasons = level(repo, G1_CPU)
    assert found == "Benchmarked" and any("is not its soak summary's" in r for r in reasons), reasons
    # The same evidence with a 30-minute clean soak of record, snapshot and soak summary: Recommended.
    summary_path = snapshot_path.with_name("soak_summary.json")
    summary = json.loads(summary_path.read_text())
    summary["duration_s"] = 1800.0
    summary_path.write_text(json.dumps(summary))
    assert level(repo, G1_CPU)[0] == "Recommended"
    # A threshold the runs of record miss: Benchmarked again, naming the figure.
    spec["thresholds"] = [{"name": "mean_reward", "at_env_steps": 480, "min": 1e9}]
    (folder / "record.yaml").write_text(yaml.safe_dump(spec))
    found, _, reasons = level(repo, G1_CPU)
    assert found == "Benchmarked" and any("mean_reward@480" in r and "outside its threshold" in r for r in reasons)
    # A learning figure of record that is not a finite number (a run whose reward diverged) meets none.
    spec["thresholds"] = [{"name": "mean_reward", "at_env_steps": 480, "min": 0.1}]
    (folder / "record.yaml").write_text(yaml.safe_dump(spec))
    snap["figures"]["mean_reward@480"] = float("nan")
    snapshot_path.write_text(json.dumps(snap))
    found, _, reasons = level(repo, G1_CPU)
    assert found == "Benchmarked" and any("mean_reward@480 on record is not a finite number" in r for r in reasons)


def test_only_a_reproduced_record_carries_recommended_and_the_readme_says_where_to_start(repo):
    """cpu-g1-30min has learning thresholds its run meets and a 30-minute clean soak; while only
    ci-dag's reproduction is kept, the configuration stays Benchmarked (evidence nobody reproduced
    promotes nothing). Its own kept reproduction makes it Recommended, and the README's line on
    where to start names it."""
    from soaklab.support.matrix import start_from

    for reproduced in (repo / "records").rglob(store.REPRODUCED):
        reproduced.unlink()
    store.keep(repo / "records", "ci-dag", self_comparison(repo, "ci-dag"))
    found, by, reasons = level(repo, G1_CPU)
    assert found == "Benchmarked" and by["record"] == "ci-dag"
    assert any("cpu-g1-30min" in r and "no kept reproduction" in r for r in reasons), reasons
    store.keep(repo / "records", "cpu-g1-30min", self_comparison(repo, "cpu-g1-30min"))
    assert level(repo, G1_CPU)[0] == "Recommended"
    # a threshold on another record that its run misses: that record carries nothing and is not named
    spec = repo / "records" / "cpu-g1-soak" / "record.yaml"
    spec.write_text(spec.read_text() + "thresholds:\n  - {name: mean_reward, at_env_steps: 3200, min: 1000.0}\n")
    line = start_from(generate(repo))
    assert ("On the CPU, Recommended: **flashsac, g1_motion_tracking, mujoco, 1 rank(s)** "
            "([cpu-g1-30min](records/cpu-g1-30min/record.yaml)).") in line, line
    assert line in outputs(repo)[README]
    # the committed files do not depend on where the checkout lies (CI compares them)
    assert not [rel for rel, text in outputs(repo.resolve()).items() if str(repo.resolve()) in text]


def failing(comparison: dict) -> dict:
    """The comparison with its first seed's final weights differing, that row failing and its bits
    `differ` (as compare writes them), the verdict field left as it was."""
    doc = json.loads(json.dumps(comparison))
    weights = next(r for r in doc["figures"] if r["name"].startswith("final weights"))
    weights.update(now="sha256:" + "1" * 64, verdict="fail")
    doc["bits"] = "differ"
    return doc


def test_keep_refuses_what_is_not_a_current_passing_reproduction(repo, tmp_path, soaklab):
    folder = artifacts(repo, "ci-dag")
    (folder / store.REPRODUCED).unlink(missing_ok=True)
    cases = {
        "verdict is fail": lambda c: failing(c) | {"verdict": "fail"},
        # forged: the verdict field against the rows, or no rows at all (soaklab.records.recheck)
        "verdict: says 'pass', its rows give 'fail'": failing,
        "figures: none": lambda c: c | {"figures": []},
        "an A/B is not a reproduction": lambda c: c | {"changes": {"algo.discount": 0.9}},
        "against an earlier record": lambda c: c | {"commit": {"record": "0" * 40, "now": "c"}},
        "the comparison is of record 'other'": lambda c: c | {"record": "other"},
        "a machine kind the record has no artifacts of": lambda c: c | {"machine": {"now": "cpu: Z80 x1"}},
        # short of the spec: its figures are the spec's, not the file's
        "the comparison: figures: no row of env_steps_per_s": lambda c: c | {
            "figures": [r for r in c["figures"] if r["name"] != "env_steps_per_s"]},
    }
    for words, edit in cases.items():
        path = tmp_path / "comparison.json"
        path.write_text(json.dumps(edit(self_comparison(repo, "ci-dag"))))
        done = soaklab("record", "keep", "ci-dag", "--comparison", str(path), cwd=repo)
        assert done.returncode == 2 and words in done.stderr, (words, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1
        assert not (folder / store.REPRODUCED).exists()
    path.write_text(json.dumps(self_comparison(repo, "ci-dag")))
    done = soaklab("record", "keep", "ci-dag", "--comparison", str(path), cwd=repo)
    assert done.returncode == 0, done.stderr
    kept = json.loads((folder / store.REPRODUCED).read_text())
    provenance = json.loads((folder / "provenance.json").read_text())
    assert kept["of_record"] == {"commit": provenance["commit"], "date": provenance["date"]}
    # A reproduction made from a tree with uncommitted changes says so where the matrix names it.
    path.write_text(json.dumps(self_comparison(repo, "ci-dag") | {"dirty": {"record": False, "now": True}}))
    assert soaklab("record", "keep", "ci-dag", "--comparison", str(path), cwd=repo).returncode == 0
    assert json.loads((folder / store.REPRODUCED).read_text())["dirty"] is True
    row = next(r for r in generate(repo) if r.evidence.combination.key == G1_CPU)
    assert row.benchmarked_by["dirty"] is True and "with changes" in record_cell(row)


FALSE_CLAIM = '''
import json
import pytest

@pytest.mark.covers("sac/cartpole_swingup/mujoco/cpu/1")
def test_claims_but_trains_nothing(tmp_path):
    pass

@pytest.mark.covers("sac/cartpole_swingup/mujoco/cpu/2")
def test_claims_two_ranks_of_a_one_rank_run(tmp_path):
    summary = {"status": "completed", "algo": "sac", "task": "cartpole_swingup", "sim": "mujoco",
               "learner_device": "cpu", "ranks": 1}
    (tmp_path / "run_summary.json").write_text(json.dumps(summary))
'''


def test_a_covers_marker_its_test_does_not_hold_fails_the_test(tmp_path):
    (tmp_path / "test_claims.py").write_text(FALSE_CLAIM)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.conftest", "-q", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), str(tmp_path / "test_claims.py")],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 1, done.stdout
    assert "2 passed, 2 errors in" in done.stdout
    assert "marked covers('sac/cartpole_swingup/mujoco/cpu/1') but its runs trained nothing" in done.stdout
    assert "but its runs trained ['sac/cartpole_swingup/mujoco/cpu/1']" in done.stdout


def test_outside_a_checkout_or_with_a_malformed_marker_it_is_one_exit_2_line(tmp_path, repo, soaklab):
    done = soaklab("support-matrix", "--check", cwd=tmp_path)
    assert done.returncode == 2 and "is not a soaklab checkout" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    (repo / "tests").unlink()
    shutil.copytree(REPO / "tests", repo / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "tests" / "test_bad_marker.py").write_text(
        'import pytest\n\n\n@pytest.mark.covers("sac/cartpole_swingup")\ndef test_x():\n    pass\n')
    done = soaklab("support-matrix", "--check", cwd=repo)
    assert done.returncode == 2 and "'sac/cartpole_swingup': a configuration is" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def _row(kept: dict, name: str) -> dict:
    return next(r for r in kept["figures"] if r["name"] == name)


def _edit_row(kept: dict, name: str, **change) -> dict:
    doc = json.loads(json.dumps(kept))
    row = _row(doc, name)
    row.update(change)
    for key in [k for k, v in change.items() if v is None]:
        row.pop(key)
    return doc


@pytest.mark.parametrize(("forge", "words"), [
    (lambda kept: failing(kept), "verdict: says 'pass', its rows give 'fail'"),
    (lambda kept: kept | {"figures": []}, "figures: none"),
    (lambda kept: kept | {"machine": "cpu: Z80 x1"}, "machine: 'cpu: Z80 x1', but it lies in the artifacts of"),
    # judged against the spec, not against itself: a row removed, another band, a row without its band
    (lambda kept: kept | {"figures": [r for r in kept["figures"] if r["name"] != "env_steps_per_s"]},
     "figures: no row of env_steps_per_s, which records/ci-dag/record.yaml compares"),
    (lambda kept: _edit_row(kept, "env_steps_per_s", band=[0.5, 2.0]),
     "figures (env_steps_per_s): band: [0.5, 2.0], the spec's is [0.1, 10.0]"),
    (lambda kept: _edit_row(kept, "env_steps_per_s", band=None, now=20 * _row(kept, "env_steps_per_s")["record"]),
     "figures (env_steps_per_s): now / record = 20, outside the spec's band [0.1, 10.0]"),
])
def test_a_forged_kept_reproduction_promotes_nothing(repo, forge, words):
    """The matrix recomputes a kept reproduction's verdict from its rows, checks its machine and
    judges it against the record's spec (every figure, with the spec's band); a forged or short one
    leaves the configuration Tested, the reason naming the record, the file and the field."""
    for reproduced in (repo / "records").rglob(store.REPRODUCED):
        reproduced.unlink()
    store.keep(repo / "records", "ci-dag", self_comparison(repo, "ci-dag"))
    assert level(repo, G1_CPU)[0] == "Benchmarked"
    kept_path = artifacts(repo, "ci-dag") / store.REPRODUCED
    kept_path.write_text(json.dumps(forge(json.loads(kept_path.read_text()))))
    found, by, reasons = level(repo, G1_CPU)
    assert found == "Tested" and by is None
    refusal = next(r for r in reasons if f"{kept_path.relative_to(repo)}: " in r)  # paths relative to the root
    assert refusal.startswith("record ci-dag (") and words in refusal, refusal


def test_a_bad_record_file_is_refused_for_its_record_only(repo, soaklab):
    """A kept reproduction nested 100,000 levels deep, a provenance with a key twice and a spec that
    does not load: `support-matrix --check` prints one error line for each and exits 2, and every
    other record is judged and listed as before."""
    rows = generate(repo)
    touched = {r.evidence.combination.key for r in rows
               if {rec.name for rec in r.evidence.records} & {"ci-dag", "gpu-soak-1024", "gpu-dp-x2"}}

    def judged(rows):
        return {r.evidence.combination.key: (r.level, r.benchmarked_by, r.reasons) for r in rows
                if r.evidence.combination.key not in touched}

    before = judged(rows)
    deep = artifacts(repo, "ci-dag") / store.REPRODUCED
    deep.write_text("[" * 100_000 + "]" * 100_000)
    twice = artifacts(repo, "gpu-soak-1024") / "provenance.json"
    twice.write_text(twice.read_text().replace("{", '{"commit": "0", ', 1))
    spec = repo / "records" / "gpu-dp-x2" / "record.yaml"
    spec.write_text("run: [\n")
    done = soaklab("support-matrix", "--check", cwd=repo)
    assert done.returncode == 2, done.stderr
    errors = sorted(line for line in done.stderr.splitlines() if line.startswith("soaklab: error: "))
    assert len(errors) == 3, done.stderr
    lines = {path: next(e for e in errors if f"{path.relative_to(repo)}: " in e) for path in (spec, deep, twice)}
    assert f"{spec.relative_to(repo)}: unreadable (" in lines[spec]
    assert lines[deep].endswith(": nested deeper than 64 levels (MAX_JSON_DEPTH); not a file soaklab wrote")
    assert lines[twice].endswith(": key 'commit' appears twice in one object; not a file soaklab wrote")
    rows = generate(repo)
    assert judged(rows) == before and before
    listed = {rec.name for r in rows for rec in r.evidence.records}
    assert "gpu-soak-1024" in listed and "ci-dag" in listed and "gpu-dp-x2" not in listed


@pytest.mark.parametrize(("edit", "words"), [
    (lambda spec: spec["run"]["overrides"].update({"algo.max_iterations": 6000}),
     "run.overrides.algo.max_iterations: 6000, but"),
    (lambda spec: spec["run"].update(algo="sac"), "run.algo: 'sac', but"),
    (lambda spec: spec.update(seeds=[1, 2]), "seeds: seed1, seed2, but"),
])
def test_a_spec_edited_after_its_artifacts_is_no_evidence_until_updated(repo, tmp_path, edit, words, soaklab):
    """record.yaml changed by hand after its runs were made: `record check` and `record keep` refuse
    in one line naming the spec and the field, the matrix gives the record no credit, nothing changes."""
    for reproduced in (repo / "records").rglob(store.REPRODUCED):
        reproduced.unlink()
    comparison = tmp_path / "comparison.json"
    comparison.write_text(json.dumps(self_comparison(repo, "ci-dag")))
    path = repo / "records" / "ci-dag" / "record.yaml"
    spec = yaml.safe_load(path.read_text())
    edit(spec)
    path.write_text(yaml.safe_dump(spec))
    before = {p: p.read_bytes() for p in (repo / "records").rglob("*") if p.is_file()}
    for args in (("record", "check", "ci-dag"), ("record", "keep", "ci-dag", "--comparison", str(comparison))):
        done = soaklab(*args, cwd=repo)
        assert done.returncode == 2, (args, done.stderr)
        [line] = done.stderr.strip().splitlines()
        assert line.startswith("soaklab: error: records/ci-dag/record.yaml: ") and words in line, line
        assert "soaklab record update ci-dag" in line
    assert {p: p.read_bytes() for p in (repo / "records").rglob("*") if p.is_file()} == before
    found, by, reasons = level(repo, f"{spec['run']['algo']}/g1_motion_tracking/mujoco/cpu/1")
    assert by is None and any(words in r for r in reasons), reasons
