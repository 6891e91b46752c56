"""Resumable checkpoints (soaklab.rl.resume): a run SIGKILLed after a checkpoint and resumed with
`soaklab train --resume` ends with the same Train/ and Loss/ series and the same final weights, bit
for bit, as the run that was never interrupted; what cannot resume is refused in one line."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from soaklab.config.overrides import merge_overrides
from soaklab.errors import REQUEUE_EXIT
from soaklab.files.checkpoints import checkpoint_iterations, collector_path, learner_path
from soaklab.metrics.events import _records, read_events
from soaklab.outcomes.validation import undeclared_gaps
from soaklab.rl.event_carry import CARRY_TMP
from tests.conftest import one_line
from tests.rl.conftest import FAST, assert_same_run, craft

# 60 iterations, a checkpoint every 20 (the last two kept: 20 and 40), the kill at iteration 47:
# the resume discards 7 iterations of work and redoes them.
SHORT = ("algo.max_iterations=60", "algo.save_interval=20", "algo.num_envs=4", "algo.batch_size=64")
KILL_AT = 47


def train(run_dir: Path, *args: str, fault: str | None = None, algo: str = "sac", task: str = "cartpole_swingup",
          manifest: Path | None = None, resume: bool = False) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("SOAKLAB_FAULT", None)
    if fault:
        env["SOAKLAB_FAULT"] = fault
    if resume:
        cmd = [sys.executable, "-m", "soaklab", "train", "--resume", str(run_dir), "--skip-post-training"]
    else:
        cmd = [sys.executable, "-m", "soaklab", "train", "--algo", algo, "--task", task, "--sim", "mujoco",
               *merge_overrides(list(FAST), list(SHORT + args)), f"training.log_dir={run_dir}",
               "--skip-post-training"]
    if manifest is not None and not resume:
        cmd += ["--assets-manifest", str(manifest)]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    """An unbroken SAC cart-pole run, and the same run SIGKILLed at iteration 47 (untouched after)."""
    root = tmp_path_factory.mktemp("resume")
    done = train(root / "unbroken")
    assert done.returncode == 0, done.stdout + done.stderr
    killed = train(root / "killed", fault=f"kill_learner@{KILL_AT}")
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    assert checkpoint_iterations(root / "killed") == [20, 40]
    assert not (root / "killed" / "run_summary.json").exists()  # nothing was shut down
    return root / "unbroken", root / "killed"


def copy_of(run_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run_dir, tmp_path / run_dir.name))


def test_a_killed_run_resumes_bit_for_bit(pair, tmp_path):
    unbroken, killed = pair
    run_dir = copy_of(killed, tmp_path)
    resumed = train(run_dir, resume=True)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resuming" in resumed.stdout and "at iteration 40" in resumed.stdout
    assert_same_run(run_dir, unbroken)
    summary = json.loads((run_dir / "run_summary.json").read_text())
    assert summary["status"] == "completed" and summary["completed_iterations"] == 60
    assert [(s["start_iteration"], s["end_iteration"]) for s in summary["segments"]] == [(0, 40), (40, 60)]
    causes = [s["cause"] for s in summary["segments"]]
    assert causes[0].startswith("killed") and causes[1] == "max_iterations"
    # Each segment says what code it ran: the same here, as the resume's checkpoint recorded it.
    codes = [s["code"] for s in summary["segments"]]
    assert codes[0] == codes[1] == torch.load(learner_path(killed, 40), weights_only=True)["code"]
    assert codes[0]["sources_sha256"].startswith("sha256:") and codes[0]["versions"]["torch"] == torch.__version__
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 1  # the event log continues in one file


def test_a_sigterm_checkpoints_the_iteration_it_finishes_and_asks_to_be_requeued(pair, tmp_path):
    """A scheduler's preemption: SIGTERM mid-run. The learner finishes the iteration in flight and
    the next, writes a resumable checkpoint there (the collector's half at the step it was asked
    for), exits REQUEUE_EXIT, and the resume from that checkpoint redoes nothing and differs in no bit."""
    unbroken, _ = pair
    run_dir = tmp_path / "preempted"
    stopped = train(run_dir, fault="sigterm_learner@33")  # noticed at iteration 34's start
    assert stopped.returncode == REQUEUE_EXIT, stopped.stdout + stopped.stderr
    assert "SIGTERM after a resumable checkpoint at iteration 35" in stopped.stderr
    assert checkpoint_iterations(run_dir) == [20, 35]
    summary = json.loads((run_dir / "run_summary.json").read_text())
    shutdown = summary["runtime_manifest"]["shutdown"]
    assert summary["status"] == "failed" and shutdown["classification"] == "external_cancellation"
    assert shutdown["cancellation"] == {"signal": "SIGTERM", "noticed": "safe point", "resumable_checkpoint": 35}
    assert summary["completed_iterations"] == 35
    resumed = train(run_dir, resume=True)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "at iteration 35" in resumed.stdout
    assert_same_run(run_dir, unbroken)
    segments = json.loads((run_dir / "run_summary.json").read_text())["segments"]
    assert [(s["start_iteration"], s["end_iteration"], s["cause"]) for s in segments] == [
        (0, 35, "external_cancellation"), (35, 60, "max_iterations")]


def test_a_crafted_newest_checkpoint_falls_back_to_the_one_before_and_never_runs(pair, tmp_path):
    """A collector file whose unpickling would create a file: the learner loads it as data before it
    spawns anything, names it, and resumes from the checkpoint before it; nothing in it ever runs."""
    unbroken, killed = pair
    run_dir = copy_of(killed, tmp_path)
    marker = tmp_path / "marker"
    craft(collector_path(run_dir, 40), marker, step=40)
    resumed = train(run_dir, resume=True)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "collector_40.pt cannot be read (not plain data (it names " in resumed.stderr
    assert "falling back" in resumed.stderr and "at iteration 20" in resumed.stdout
    assert_same_run(run_dir, unbroken)  # 27 iterations redone, the same bits
    assert not marker.exists()


def test_checkpoints_that_cannot_be_read_as_data_are_refused_before_anything_runs(pair, tmp_path, cli):
    """No checkpoint readable as data: one line naming each file and why, before anything is
    spawned, and nothing changed. A crafted final checkpoint is refused the same way by the same-run
    check; no payload ever runs."""
    from soaklab.errors import InvalidInput
    from soaklab.metrics.same_run import final_weights

    unbroken, killed = pair
    marker = tmp_path / "marker"
    crafted = copy_of(killed, tmp_path)
    craft(learner_path(crafted, 40), marker, iteration=40)
    torn = learner_path(crafted, 20)
    torn.write_bytes(torn.read_bytes()[: torn.stat().st_size // 2])
    before = sorted(p.name for p in crafted.rglob("*"))
    result = cli("train", "--resume", crafted)
    line = one_line(result.err)
    assert result.code == 2 and "no readable checkpoint" in line
    assert "learner_40.pt cannot be read (not plain data (it names " in line
    assert "learner_20.pt cannot be read (not a soaklab checkpoint" in line
    assert sorted(p.name for p in crafted.rglob("*")) == before

    collectors = tmp_path / "collectors"
    shutil.copytree(killed, collectors)
    for k in checkpoint_iterations(collectors):
        craft(collector_path(collectors, k), marker, step=k)
    result = cli("train", "--resume", collectors)
    line = one_line(result.err)
    assert result.code == 2 and "collector_40.pt cannot be read" in line and "collector_20.pt cannot be read" in line

    judged = copy_of(unbroken, tmp_path)  # the same-run check (export, play, evaluate: tests/policy/test_export.py)
    craft(judged / "checkpoints" / "model_final.pt", marker, iteration=60, agent={})
    with pytest.raises(InvalidInput, match="not plain data"):
        final_weights(judged)
    assert not marker.exists()



def files_of(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def _python_rng_too_short(state: dict) -> None:
    state["host_rng"]["python"] = (3, (1, 2), None)


# Plain data that weights_only loads, of the wrong structure: (file, change, words of the refusal).
WRONG_STRUCTURE = {
    "learner_keys": ("learner", lambda s, k: s.clear() or s.update(iteration=k, config_hash="x"),
                     "the learner file lacks env_steps"),
    "python_rng": ("learner", lambda s, k: _python_rng_too_short(s), "host_rng: not an RNG state"),
    "torch_rng": ("learner", lambda s, k: s["host_rng"].update(torch=s["host_rng"]["torch"][:100]),
                  "host_rng.torch: not a generator state"),
    "replay": ("learner", lambda s, k: s["replay"].update(rows=s["replay"]["rows"][:, :3]), "replay.rows has shape"),
    "counters": ("learner", lambda s, k: s.update(env_steps=-5), "env_steps is -5"),
    "counter_type": ("learner", lambda s, k: s.update(update_count="abc"), "update_count is str, not int"),
    "agent": ("learner", lambda s, k: s["agent"].update(actor=("code", {})), "agent.actor is not one of"),
    "collector_keys": ("collector", lambda s, k: s.clear() or s.update(step=k), "the collector file lacks envs"),
    "published": ("collector", lambda s, k: s.update(published=[(o[:1], c, d) for o, c, d in s["published"]]),
                  "published[0].obs has shape"),
}


@pytest.mark.parametrize("case", sorted(WRONG_STRUCTURE))
def test_checkpoints_of_the_wrong_structure_are_refused_before_anything_starts(pair, tmp_path, cli, case):
    """Every checkpoint plain data of the wrong structure: one line naming each file and what is wrong,
    before the event file is carried or a segment recorded."""
    _, killed = pair
    run_dir = copy_of(killed, tmp_path)
    kind, change, words = WRONG_STRUCTURE[case]
    for k in checkpoint_iterations(run_dir):
        path = (learner_path if kind == "learner" else collector_path)(run_dir, k)
        state = torch.load(path, weights_only=True)
        change(state, k)
        torch.save(state, path)
    before = files_of(run_dir)
    result = cli("train", "--resume", run_dir)
    line = one_line(result.err)
    assert result.code == 2 and "no readable checkpoint" in line, line
    assert f"{kind}_40.pt cannot be read ({words}" in line and f"{kind}_20.pt cannot be read ({words}" in line
    assert files_of(run_dir) == before  # nothing carried, no segment, no summary


def test_a_newest_checkpoint_of_the_wrong_structure_falls_back_to_the_one_before(pair, tmp_path):
    unbroken, killed = pair
    run_dir = copy_of(killed, tmp_path)
    state = torch.load(learner_path(run_dir, 40), weights_only=True)
    _python_rng_too_short(state)
    torch.save(state, learner_path(run_dir, 40))
    resumed = train(run_dir, resume=True)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "train: warning: learner_40.pt cannot be read (host_rng: not an RNG state" in resumed.stderr
    assert "falling back" in resumed.stderr and "at iteration 20" in resumed.stdout
    assert_same_run(run_dir, unbroken)


# segments.json as read_json refuses it, or of the wrong types: (text, words of the refusal).
BAD_SEGMENTS = {
    "deep": ('{"segments": ' + "[" * 100 + "]" * 100 + "}", "nested deeper than"),
    "duplicate": ('{"segments": [], "segments": []}', "key 'segments' appears twice"),
    "infinity": ('{"segments": [{"start_iteration": 0, "resumed_from_checkpoint": Infinity, "end_iteration": null,'
                 ' "cause": null}]}', "inf is not of type 'integer', 'null'"),
    "nan": ('{"segments": [{"start_iteration": NaN, "resumed_from_checkpoint": null, "end_iteration": null,'
            ' "cause": null}]}', "nan is not of type 'integer'"),
    "string": ('{"segments": [{"start_iteration": "0", "resumed_from_checkpoint": null, "end_iteration": null,'
               ' "cause": null}]}', "'0' is not of type 'integer'"),
    "missing": (None, "missing, and every run writes it when it starts"),
    "fifo": (FIFO := "<a FIFO>", "not a regular file"),  # its read would block the resume for good
}


@pytest.mark.parametrize("case", sorted(BAD_SEGMENTS))
def test_a_segments_file_that_cannot_be_trusted_is_refused_never_replaced(pair, tmp_path, cli, case):
    """segments.json is the run's history (its kills, its declared gaps): refused in one line before
    anything is written, never rewritten from nothing."""
    _, killed = pair
    run_dir = copy_of(killed, tmp_path)
    text, words = BAD_SEGMENTS[case]
    path = run_dir / "segments.json"
    if text is None or text == FIFO:
        path.unlink()
        if text == FIFO:
            os.mkfifo(path)
    else:
        path.write_text(text)
    before = files_of(run_dir)
    result = cli("train", "--resume", run_dir)
    line = one_line(result.err)
    assert result.code == 2 and f"{path}: " in line and words in line, line
    assert files_of(run_dir) == before


def test_flashsac_on_g1_resumes_bit_for_bit(g1_assets, tmp_path):
    """The project's own task and agent: physics, adaptive sampler, held noise, return scale. Shorter
    than the cart-pole pair (40 iterations, a checkpoint every 10, the kill at 33): the resume's
    bookkeeping is that pair's to test, each G1 iteration here costs CI a G1 step and its update."""
    args = dict(algo="flashsac", task="g1_motion_tracking", manifest=g1_assets.manifest_path)
    short = ("algo.max_iterations=40", "algo.save_interval=10")
    done = train(tmp_path / "unbroken", *short, **args)
    assert done.returncode == 0, done.stdout + done.stderr
    killed = train(tmp_path / "killed", *short, fault="kill_learner@33", **args)
    assert killed.returncode == -signal.SIGKILL
    assert checkpoint_iterations(tmp_path / "killed") == [20, 30]
    resumed = train(tmp_path / "killed", resume=True)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert_same_run(tmp_path / "killed", tmp_path / "unbroken")


def test_what_cannot_resume_is_refused_in_one_line(pair, tmp_path, cli):
    unbroken, killed = pair
    result = cli("train", "--resume", tmp_path / "nowhere")
    assert result.code == 2 and "no run_config.json there" in one_line(result.err)

    result = cli("train", "--resume", unbroken)
    assert result.code == 2 and "the run completed" in one_line(result.err)

    bare = copy_of(killed, tmp_path)
    shutil.rmtree(bare / "resume")
    result = cli("train", "--resume", bare)
    assert result.code == 2 and "no readable checkpoint" in one_line(result.err)

    changed = tmp_path / "changed"
    shutil.copytree(killed, changed)
    for k in checkpoint_iterations(changed):  # as if the run had been started with another config
        state = torch.load(learner_path(changed, k), weights_only=True)  # plain data, as soaklab reads it
        state["config_hash"] = "sha256:" + "0" * 64
        torch.save(state, learner_path(changed, k))
    before = sorted(p.name for p in changed.rglob("*"))
    result = cli("train", "--resume", changed)
    assert result.code == 2 and "was made with config sha256:000" in one_line(result.err)
    assert sorted(p.name for p in changed.rglob("*")) == before  # nothing changed

    # Made by other code (another soaklab's sources, another torch), or by a soaklab from before the
    # checkpoints recorded their code: the resumed run would not be the unbroken one.
    for name, change, said, at in (
            ("sources", {"sources_sha256": "sha256:" + "0" * 64, "commit": "c0ffee" * 7, "dirty": False},
             "the training sources were sha256:000000000000..., now sha256:", "(commit c0ffeec0ffeec0ffeec...)"),
            ("torch", {"versions": {"torch": "2.0.0"}}, "torch was 2.0.0, now ", "(commit "),
            ("older", None, "it records no code (made by a soaklab older", "(an unknown commit)")):
        other = tmp_path / f"other-{name}"
        shutil.copytree(killed, other)
        for k in checkpoint_iterations(other):
            state = torch.load(learner_path(other, k), weights_only=True)
            if change is None:
                del state["code"]
            else:
                state["code"] = {**state["code"], **change,
                                 "versions": {**state["code"]["versions"], **change.get("versions", {})}}
            torch.save(state, learner_path(other, k))
        before = files_of(other)
        result = cli("train", "--resume", other)
        line = one_line(result.err)
        assert result.code == 2 and "its checkpoint at iteration 40 was made by other code (" in line, line
        assert said in line and at in line
        assert "a resume on other code is not the unbroken run; resume with the code that made it" in line
        assert files_of(other) == before  # nothing changed, nothing spawned into it

    result = cli("train", "--resume", killed, "--run-config", killed / "run_config.json")
    assert result.code == 2 and "--resume: takes the run's own run_config.json" in one_line(result.err)


# -- the event file across a resume (soaklab.rl.event_carry) ---------------------------------------------
RESUME_AT = 40  # the killed run's newest checkpoint


@pytest.mark.parametrize("step", ["kill_carry_tmp", "kill_carry", "kill_checkpoint_load", "kill_segment"])
def test_a_kill_at_each_step_of_a_resume_leaves_a_run_the_next_resume_completes(pair, tmp_path, step):
    """SIGKILL with the carried events under their temporary name, half copied into the new event
    file (two event files), the checkpoint half loaded, right after the segment's record: the next
    resume cleans up, completes, and its series equal the unbroken run's."""
    unbroken, killed = pair
    run_dir = copy_of(killed, tmp_path)
    original = event_files(run_dir)[0].read_bytes()
    stopped = train(run_dir, resume=True, fault=f"{step}@{RESUME_AT}")
    assert stopped.returncode == -signal.SIGKILL, stopped.stdout + stopped.stderr
    if step == "kill_carry_tmp":  # the original untouched beside its whole replacement-to-be
        assert (run_dir / CARRY_TMP).is_file() and event_files(run_dir)[0].read_bytes() == original
    if step == "kill_carry":
        assert len(event_files(run_dir)) == 2  # what made every later resume fail before
    resumed = train(run_dir, resume=True)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert_same_run(run_dir, unbroken)
    assert len(event_files(run_dir)) == 1 and not (run_dir / CARRY_TMP).exists()
    assert json.loads((run_dir / "run_summary.json").read_text())["event_gaps"] == []


def event_files(run_dir: Path) -> list[Path]:
    return sorted(run_dir.glob("events.out.tfevents.*"))


def scalar_records(path: Path) -> list[tuple[int, int, str, int]]:
    """(byte offset, byte end, tag, step) of each scalar record."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.summary.writer.record_writer import masked_crc32c

    out = []
    for record in _records(path.read_bytes(), path, masked_crc32c):
        event = Event.FromString(record.body)
        for value in event.summary.value:
            out.append((record.start, record.start + 16 + len(record.body), value.tag, event.step))
    return out


@pytest.mark.parametrize("damage", ["flipped", "not_an_event"])
def test_a_damaged_event_record_is_carried_around_and_declared(pair, tmp_path, damage):
    """One record's data damaged in the middle of the killed run's event file (a flipped bit; or
    bytes that are no Event under valid CRCs): the resume keeps every other row, the ones after it
    included, declares the gap in run_summary.json, and validation fails the same rows missing
    without the declaration."""
    from soaklab.metrics.events import frame_records

    unbroken, killed = pair
    run_dir = copy_of(killed, tmp_path)
    path = event_files(run_dir)[0]
    start, end, tag, step = next(r for r in scalar_records(path) if r[2] == "Perf/total_fps" and r[3] == 20)
    data = bytearray(path.read_bytes())
    if damage == "flipped":
        data[end - 6] ^= 0xFF  # a flipped bit in the data: its CRC fails, its length still holds
        words = "corrupted event record data"
    else:  # as long as the record it replaces, so the byte range is the same
        data[start:end] = frame_records([b"\xff" * (end - start - 16)])
        words = "event record data that is not an Event"
    path.write_bytes(bytes(data))

    if damage == "flipped":  # killed before the carried file is renamed into place: the damaged original is whole
        stopped = train(run_dir, resume=True, fault=f"kill_carry_tmp@{RESUME_AT}")
        assert stopped.returncode == -signal.SIGKILL and path.read_bytes() == bytes(data)
    resumed = train(run_dir, resume=True)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"{words} at bytes {start}..{end}" in resumed.stderr
    summary = json.loads((run_dir / "run_summary.json").read_text())
    [gap] = summary["event_gaps"]
    assert (gap["file"], gap["byte_start"], gap["byte_end"]) == (path.name, start, end)
    assert gap["steps"][0] <= step <= gap["steps"][1] and gap["missing_rows"] == {tag: [step]}

    frame, _ = read_events(event_files(run_dir)[0])
    reference, _ = read_events(event_files(unbroken)[0])
    rows, expected = set(zip(frame["tag"], frame["step"], strict=True)), set(zip(reference["tag"], reference["step"],
                                                                                strict=True))
    assert expected - rows == {(tag, step)} and rows <= expected  # that row alone: every later one carried
    assert_same_run(run_dir, unbroken)  # Perf/ timings aside, every series bit for bit
    assert undeclared_gaps(run_dir, event_files(run_dir)[0].name, summary) == []
    assert undeclared_gaps(run_dir, event_files(run_dir)[0].name, {**summary, "event_gaps": []}) == [
        f"{tag}: 1 steps missing ({step}..{step}), no gap declared"]


def test_an_event_record_whose_length_is_damaged_is_refused_before_anything_starts(pair, tmp_path, cli):
    unbroken, killed = pair
    run_dir = copy_of(killed, tmp_path)
    path = event_files(run_dir)[0]
    start = next(r[0] for r in scalar_records(path) if r[3] == 20)
    data = bytearray(path.read_bytes())
    data[start + 2] ^= 0xFF
    path.write_bytes(bytes(data))
    before = {p.name: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    result = cli("train", "--resume", run_dir)
    assert result.code == 2
    assert f"{path.name}: corrupted event record length at byte offset {start}" in one_line(result.err)
    assert {p.name: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before  # nothing started
