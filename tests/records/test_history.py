"""`soaklab record history` on a git history it builds: sets of record committed at three commits on
one GPU model, one on another, and CI's comparison handed in. The points come back in time order,
the machine kinds apart, the drift the bands missed is judged a regression, and the page carries a
plot per figure and the git log between the points."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess

from soaklab.records import store
from soaklab.records.compare import compare
from soaklab.records.outcome import write_comparison
from tests.conftest import REPO, one_line

NAME = "gpu-soak-1024"
TEMPLATE = REPO / "records" / NAME / "machines" / "gpu-nvidia-h100-80gb-hbm3-x1"
H200, H100 = "gpu: NVIDIA H200 x1", "gpu: NVIDIA H100 80GB HBM3 x1"


def _git(root, *args):
    return subprocess.run(["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t", *args], check=True,
                          capture_output=True, text=True).stdout.strip()


def _set(folder, kind, throughput, commit, date):
    """A set of record of `kind` whose three seeds ran at `throughput` env-steps/s (the real snapshot's
    other fields)."""
    target = folder / "machines" / kind.replace(": ", "-").replace(" ", "-").lower()
    provenance = json.loads((TEMPLATE / "provenance.json").read_text())
    provenance.update(commit=commit, date=date, machine_kind=kind, dirty=False)
    target.mkdir(parents=True, exist_ok=True)
    (target / "provenance.json").write_text(json.dumps(provenance))
    snaps = {}
    for seed in (1, 2, 3):
        snap = json.loads((TEMPLATE / "runs" / f"seed{seed}" / "snapshot.json").read_text())
        snap.update(machine_kind=kind, commit=commit)
        snap["figures"]["env_steps_per_s"] = throughput * (1 + (seed - 2) * 0.001)
        (target / "runs" / f"seed{seed}").mkdir(parents=True, exist_ok=True)
        (target / "runs" / f"seed{seed}" / "snapshot.json").write_text(json.dumps(snap))
        snaps[f"seed{seed}"] = snap
    return provenance, snaps


def test_history_keeps_machine_kinds_apart_and_judges_a_drift_each_band_missed(cli, tmp_path, monkeypatch):
    root = tmp_path / "repo"
    folder = root / "records" / NAME
    folder.mkdir(parents=True)
    shutil.copyfile(REPO / "records" / NAME / "record.yaml", folder / "record.yaml")
    shutil.copytree(REPO / "workflow" / "schemas", root / "workflow" / "schemas")  # what the spec is checked with
    _git(root, "init", "-q", "-b", "main")
    made = []
    for n, throughput in enumerate([100_000.0, 96_000.0, 92_160.0]):  # -4 % a set: each inside [0.9, 1.1]
        (root / "NOTES").write_text(f"change {n}\n")
        _git(root, "add", "NOTES")
        _git(root, "commit", "-q", "-m", f"change {n}")
        commit = _git(root, "rev-parse", "HEAD")
        provenance, snaps = _set(folder, H200, throughput, commit, f"2026-12-0{n + 1}T10:00:00+00:00")
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", f"H200 set of {commit[:7]}")
        made.append(commit)
    _set(folder, H100, 95_000.0, made[-1], "2026-12-03T12:00:00+00:00")  # in the working tree, not committed
    # CI's reproduction on the H200 at -4 % once more: inside its set's band, a drift of -11.5 % in all
    record = store.load(root / "records", NAME)
    now = copy.deepcopy(snaps)
    for snap in now.values():
        snap["figures"]["env_steps_per_s"] *= 0.96
        snap["commit"] = _git(root, "rev-parse", "HEAD")
    comparison = compare(record, provenance, snaps, now)
    comparison["date"] = "2026-12-04T10:00:00+00:00"
    assert comparison["verdict"] == "pass"
    write_comparison(comparison, tmp_path / "comparison.json", None)

    out = tmp_path / "history"
    monkeypatch.chdir(root)
    # the comparison given twice is one point: a run cannot supply its own lookback
    result = cli("record", "history", NAME, "--out-dir", out, "--comparison", tmp_path / "comparison.json",
                 "--comparison", tmp_path / "comparison.json", "--fail-on-regression")
    assert result.code == 1, result.err
    doc = json.loads((out / f"{NAME}.json").read_text())
    assert [(p["source"], p["machine"]) for p in doc["points"]] == [
        ("set", H200), ("set", H200), ("set", H200), ("set", H100), ("ci", H200)]
    assert [p["stored"] for p in doc["points"][:3]] == [f"git {_git(root, 'rev-parse', f'HEAD~{n}')[:10]}"
                                                         for n in (4, 2, 0)]
    h200 = doc["regression"]["machines"][H200]["figures"]["env_steps_per_s"]
    assert h200["verdict"] == "regression" and h200["window"] == [p["figures"]["env_steps_per_s"]
                                                                  for p in doc["points"][:3]]
    assert doc["regression"]["machines"][H100]["figures"]["env_steps_per_s"]["verdict"] == "too_few"
    assert doc["regression"]["verdict"] == "fail"
    assert f"{H200}: env_steps_per_s: regression" in result.out
    # the git log between the first two sets' commits names the commit between them
    assert any(line.endswith("H200 set of " + made[0][:7]) for line in doc["log"][0]["lines"])
    page = (out / f"{NAME}.html").read_text()
    assert page.count("<svg") == len(record.figures) and "regression verdict: fail" in page
    assert "<img" not in page and "src=" not in page  # self-contained


def test_a_comparison_of_another_record_or_with_many_records_is_refused(cli, tmp_path, monkeypatch):
    comparison = json.loads((REPO / "docs" / "examples" / "gpu-learning" / "self-comparison.json").read_text())
    (tmp_path / "c.json").write_text(json.dumps(comparison))
    monkeypatch.chdir(REPO)
    result = cli("record", "history", NAME, "--out-dir", tmp_path / "out", "--comparison", tmp_path / "c.json")
    assert result.code == 2 and "a comparison of record 'gpu-learning', not gpu-soak-1024" in one_line(result.err)
    result = cli("record", "history", "--all", "--out-dir", tmp_path / "out", "--comparison", tmp_path / "c.json")
    assert result.code == 2 and "name that record alone" in one_line(result.err)
    result = cli("record", "history", "--out-dir", tmp_path / "out")
    assert result.code == 2 and "name the records, or pass --all" in one_line(result.err)
    # a gpu record's history takes no point of a cpu machine (it would be a machine kind of its own)
    comparison["machine"]["now"] = "cpu: x86_64 AVX2 AMD, 2 threads, inductor task terms"
    (tmp_path / "c.json").write_text(json.dumps(comparison))
    result = cli("record", "history", "gpu-learning", "--out-dir", tmp_path / "out",
                 "--comparison", tmp_path / "c.json")
    assert result.code == 2 and "not a gpu machine as record gpu-learning is" in one_line(result.err)
    # the name as typed, not the folder it resolves to; the records folder is an input
    result = cli("record", "history", "../records", "--records", REPO / "records" / NAME, "--out-dir", tmp_path / "out")
    assert result.code == 2 and "record '../records': not a record name" in one_line(result.err)
    result = cli("record", "history", NAME, "--out-dir", REPO / "records" / NAME)
    assert result.code == 2 and "--out-dir" in one_line(result.err) and "is inside the input --records" in result.err
    assert not (tmp_path / "out").exists() and not (REPO / "records" / NAME / f"{NAME}.json").exists()
    # records outside a soaklab checkout: the specs cannot be checked against the workflow's schema
    shutil.copytree(REPO / "records" / NAME, tmp_path / "copy" / "records" / NAME)
    monkeypatch.chdir(tmp_path / "copy")
    result = cli("record", "history", NAME, "--out-dir", tmp_path / "out")
    assert result.code == 2 and "--records records: not in a soaklab checkout" in one_line(result.err)


def test_a_point_not_judged_still_says_whether_its_bits_held():
    from soaklab.records.history import comparison_point

    def rows(*held):
        return [{"name": f"final weights (seed{i})", "rule": "exact", "verdict": "not_comparable", **h}
                for i, h in enumerate(held)]

    def bits(figures):
        return comparison_point({"figures": figures, "verdict": "not_comparable"}, "run", "stored")["bits"]

    assert bits(rows({"held": True}, {"held": True})) == "equal, not judged"
    assert bits(rows({"held": True}, {"held": False})) == "differ, not judged"
    assert bits(rows({"held": True}, {})) == "not judged"  # kept before rows carried it
