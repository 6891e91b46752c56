"""`soaklab assets pull`: pinned source, verification, corruption, offline, local sources."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from soaklab.assets.source import G1_WHEEL, safe_member_path
from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import sha256_file
from tests.conftest import one_line


def pull(cli, root: Path, *extra, env=None):
    """A pull into `root`; the synthetic default clip unless the test picks a clip (no download)."""
    picks = any(str(e).startswith("--clip") for e in extra)
    return cli("assets", "pull", "--robot", "g1", "--dest", root / "resources", "--manifest",
               root / "manifest.json", *extra, *(() if picks else ("--clip", "synthetic")), env=env)


@pytest.fixture
def pulled(cli, tmp_path, pinned_wheel):
    result = pull(cli, tmp_path, "--source", pinned_wheel)
    assert result.code == 0, result.err
    return tmp_path


def test_manifest_records_source_files_and_motion(pulled):
    manifest = json.loads((pulled / "manifest.json").read_text())
    source = manifest["source"]
    assert source["kind"] == "pinned_wheel" and source["sha256"] == G1_WHEEL.sha256
    assert source["license"]["expression"] == "Apache-2.0"
    assert source["subtree"] == "mjlab/asset_zoo/robots/unitree_g1/xmls/"
    paths = {Path(f["path"]).relative_to(pulled / "resources/g1").as_posix() for f in manifest["files"]}
    assert "g1.xml" in paths and "assets/pelvis.STL" in paths
    assert all(not p.startswith("mjlab") for p in paths), "only the G1 subtree is extracted"
    for entry in manifest["files"] + [manifest["scene"], manifest["motion"]]:
        assert sha256_file(Path(entry["path"])) == entry["sha256"]
        assert Path(entry["path"]).stat().st_size == entry["bytes"]
    assert manifest["motion"]["synthetic"] is True and manifest["motion"]["fps"] == 50.0


def test_second_pull_verifies_and_changes_nothing(cli, pulled, pinned_wheel):
    files = sorted(p for p in (pulled / "resources").rglob("*") if p.is_file())
    before = {p: (p.stat().st_mtime_ns, sha256_file(p)) for p in files}
    manifest_before = (pulled / "manifest.json").stat().st_mtime_ns
    result = pull(cli, pulled, "--source", pinned_wheel)
    assert result.code == 0 and "nothing changed" in result.out
    assert {p: (p.stat().st_mtime_ns, sha256_file(p)) for p in files} == before
    assert (pulled / "manifest.json").stat().st_mtime_ns == manifest_before


def test_corrupted_file_is_reported_by_name_and_repairable(cli, pulled, pinned_wheel):
    victim = pulled / "resources/g1/assets/left_knee_link.STL"
    victim.write_bytes(b"garbage")
    result = pull(cli, pulled, "--source", pinned_wheel)
    assert result.code == 2
    assert str(victim) in result.err and "corrupted" in result.err and "--repair" in result.err
    assert victim.read_bytes() == b"garbage", "a refused pull changes nothing"
    result = pull(cli, pulled, "--source", pinned_wheel, "--repair")
    assert result.code == 0, result.err
    assert pull(cli, pulled, "--source", pinned_wheel).code == 0


def test_offline_with_missing_assets_fails_closed_without_fetching(cli, tmp_path):
    result = pull(cli, tmp_path, env={"SOAKLAB_OFFLINE": "1"})
    assert result.code == 2
    assert "SOAKLAB_OFFLINE=1" in one_line(result.err)
    assert not (tmp_path / "manifest.json").exists()
    assert not (tmp_path / "resources/g1").exists()


def test_offline_with_cached_wheel_works(cli, tmp_path, pinned_wheel):
    cache = tmp_path / "resources/cache"
    cache.mkdir(parents=True)
    (cache / G1_WHEEL.filename).write_bytes(pinned_wheel.read_bytes())
    result = pull(cli, tmp_path, env={"SOAKLAB_OFFLINE": "1"})
    assert result.code == 0, result.err
    assert json.loads((tmp_path / "manifest.json").read_text())["source"]["kind"] == "pinned_wheel"


def test_directory_source(cli, pulled, tmp_path_factory):
    other = tmp_path_factory.mktemp("dir-source")
    result = pull(cli, other, "--source", pulled / "resources/g1")
    assert result.code == 0, result.err
    manifest = json.loads((other / "manifest.json").read_text())
    assert manifest["source"]["kind"] == "directory"
    assert manifest["scene"]["nu"] == 29


def test_real_motion_clip_is_validated_and_recorded(cli, pulled, tmp_path_factory):
    clip = pulled / "resources/g1/motions/synthetic_dance.npz"
    real = tmp_path_factory.mktemp("clips") / "dance1.npz"
    real.write_bytes(clip.read_bytes())
    other = tmp_path_factory.mktemp("real-motion")
    result = pull(cli, other, "--source", pulled / "resources/g1", "--motion", real)
    assert result.code == 0, result.err
    motion = json.loads((other / "manifest.json").read_text())["motion"]
    assert motion["synthetic"] is False and motion["origin"] == str(real)


def test_bad_motion_clip_fails_closed_and_keeps_the_old_tree(cli, pulled, tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"nope")
    manifest_before = (pulled / "manifest.json").read_bytes()
    result = pull(cli, pulled, "--source", pulled / "resources/g1", "--motion", bad)
    assert result.code == 2
    assert str(bad) in one_line(result.err)
    assert (pulled / "manifest.json").read_bytes() == manifest_before
    assert (pulled / "resources/g1/scene.xml").is_file()


def test_unknown_robot_and_missing_source(cli, tmp_path):
    refused = cli("assets", "pull", "--robot", "h1", "--dest", tmp_path)
    assert refused.code == 2 and "--robot: invalid choice: 'h1'" in one_line(refused.err)
    result = pull(cli, tmp_path, "--source", tmp_path / "nowhere.whl")
    assert result.code == 2 and "nowhere.whl" in one_line(result.err)


def test_wheel_with_escaping_member_is_refused(cli, tmp_path, pinned_wheel):
    evil = tmp_path / "evil.whl"
    with zipfile.ZipFile(pinned_wheel) as src, zipfile.ZipFile(evil, "w") as dst:
        for item in src.infolist():
            if item.filename.startswith(G1_WHEEL.subtree):
                dst.writestr(item, src.read(item))
        dst.writestr("mjlab/asset_zoo/robots/unitree_g1/xmls/../../../../../etc/evil", b"x")
    result = pull(cli, tmp_path, "--source", evil)
    assert result.code == 2 and "parent-relative" in one_line(result.err)
    assert not (tmp_path / "resources/g1").exists()


def evil_wheel(pinned_wheel: Path, path: Path, name: str, data: bytes = b"x", mode: int | None = None,
               compress: int = zipfile.ZIP_STORED) -> Path:
    """The pinned wheel's G1 subtree plus one crafted member."""
    with zipfile.ZipFile(pinned_wheel) as src, zipfile.ZipFile(path, "w") as dst:
        for item in src.infolist():
            if item.filename.startswith(G1_WHEEL.subtree):
                dst.writestr(item, src.read(item))
        info = zipfile.ZipInfo(name)
        if mode is not None:
            info.external_attr = mode << 16
        info.compress_type = compress
        dst.writestr(info, data)
    return path


def test_an_empty_path_component_cannot_write_outside_dest(cli, tmp_path, pinned_wheel):
    """`SUBTREE` + `/ABS/PATH`: stripping the prefix leaves an absolute path; it is refused first."""
    outside = tmp_path / "outside" / "pwned"
    wheel = evil_wheel(pinned_wheel, tmp_path / "evil.whl", G1_WHEEL.subtree + str(outside))
    assert str(outside).startswith("/") and "//" in G1_WHEEL.subtree + str(outside)
    result = pull(cli, tmp_path, "--source", wheel)
    assert result.code == 2 and "empty" in one_line(result.err)
    assert not outside.exists() and not (tmp_path / "resources/g1").exists()
    assert not list((tmp_path / "resources").glob(".staging-*"))


def test_a_member_declaring_more_than_a_model_holds_is_refused_before_a_byte_is_written(cli, tmp_path, pinned_wheel):
    """A zip bomb in the model's subtree: 65 MiB of zeros deflated to some 64 kB, over the 64 MiB limit."""
    from soaklab.assets.source import MAX_MEMBER_BYTES

    wheel = evil_wheel(pinned_wheel, tmp_path / "bomb.whl", G1_WHEEL.subtree + "assets/bomb.STL",
                       bytes(MAX_MEMBER_BYTES + (1 << 20)), compress=zipfile.ZIP_DEFLATED)
    assert wheel.stat().st_size < 32 << 20
    result = pull(cli, tmp_path, "--source", wheel)
    line = one_line(result.err)
    assert result.code == 2 and f"{wheel}: member {G1_WHEEL.subtree}assets/bomb.STL declares" in line
    assert "limit 67,108,864" in line
    assert not (tmp_path / "resources/g1").exists() and not list((tmp_path / "resources").glob(".staging-*"))


def test_a_symlink_member_is_refused(cli, tmp_path, pinned_wheel):
    wheel = evil_wheel(pinned_wheel, tmp_path / "link.whl", G1_WHEEL.subtree + "assets/link.STL", b"/etc/passwd",
                       mode=0o120777)
    result = pull(cli, tmp_path, "--source", wheel)
    assert result.code == 2 and "symlink" in one_line(result.err)
    assert not (tmp_path / "resources/g1").exists()


def test_concurrent_pulls_into_one_dest_are_serialised(tmp_path, pinned_wheel):
    """Two real processes pull into the same dest at once: both succeed, one after the other."""
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "soaklab", "assets", "pull", "--robot", "g1", "--dest", str(tmp_path / "resources"),
           "--manifest", str(tmp_path / "manifest.json"), "--source", str(pinned_wheel), "--clip", "synthetic"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert any("nothing changed" in out for out, _ in outputs)  # the second found the first's work
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert all(sha256_file(Path(f["path"])) == f["sha256"] for f in manifest["files"])
    assert not list((tmp_path / "resources").glob(".staging-*"))


@pytest.mark.parametrize("name", ["/etc/passwd", "a/../../b", "C:/x", "a//etc/passwd", "a/./b", "a\\b", "x//y"])
def test_safe_member_path_refuses_escapes(name):
    with pytest.raises(InvalidInput):
        safe_member_path(name, "a/")


@pytest.mark.parametrize(("name", "expected"), [("a/x/y", "x/y"), ("b/x", None), ("a/d/", None), ("b/", None)])
def test_safe_member_path_keeps_the_subtree_and_skips_folders(name, expected):
    result = safe_member_path(name, "a/")
    assert (None if result is None else result.as_posix()) == expected


def test_unpinned_wheel_is_recorded_as_such(cli, tmp_path, pinned_wheel):
    other = tmp_path / "other.whl"
    with zipfile.ZipFile(pinned_wheel) as src, zipfile.ZipFile(other, "w") as dst:
        for item in src.infolist():
            dst.writestr(item, src.read(item))
        dst.writestr("extra.txt", b"changed")
    result = pull(cli, tmp_path, "--source", other)
    assert result.code == 0, result.err
    source = json.loads((tmp_path / "manifest.json").read_text())["source"]
    assert source["kind"] == "wheel" and source["sha256"] == sha256_file(other)


# -- the real reference clip (holosoma's, converted by name) -----------------------------------------

@pytest.fixture
def pulled_real(cli, tmp_path, pinned_wheel, clip_wheel):
    result = pull(cli, tmp_path, "--source", pinned_wheel, "--clip-wheel", clip_wheel)
    assert result.code == 0, result.err
    return tmp_path


def test_real_clip_is_converted_by_name_and_recorded(pulled_real, clip_wheel):
    import mujoco
    import numpy as np

    from soaklab.assets.clips import HOLOSOMA_WHEEL, PUBLISHED_CLIPS
    from soaklab.assets.motion import load_motion, robot_body_names

    manifest = json.loads((pulled_real / "manifest.json").read_text())
    motion = manifest["motion"]
    assert motion["clip"] == "largebox" and motion["synthetic"] is False and motion["frames"] == 325
    assert motion["wheel"]["kind"] == "pinned_wheel" and motion["wheel"]["sha256"] == HOLOSOMA_WHEEL.sha256
    assert motion["wheel"]["license"]["expression"] == "Apache-2.0"
    assert set(manifest["motions"]) == {"largebox", "crawl_slope", "synthetic"}
    model = mujoco.MjModel.from_xml_path(manifest["scene"]["path"])
    clip = load_motion(Path(motion["path"]), model)
    assert clip.body_names == tuple(robot_body_names(model))
    # Columns were picked by name: compare two joints and a body with the wheel's own arrays.
    with zipfile.ZipFile(clip_wheel) as zf:
        raw = zf.read(PUBLISHED_CLIPS["largebox"].archive_name)
    import io
    with np.load(io.BytesIO(raw)) as src:
        joints, bodies = list(src["joint_names"]), list(src["body_names"])
        for name in ("left_knee_joint", "right_wrist_yaw_joint"):
            np.testing.assert_allclose(clip.joint_pos[:, model.joint(name).id - 1],
                                       src["joint_pos"][:, 7 + joints.index(name)], rtol=1e-6)
        torso = model.body("torso_link").id - 1
        np.testing.assert_allclose(clip.body_pos_w[:, torso], src["body_pos_w"][:, bodies.index("torso_link")],
                                   rtol=1e-6)


def test_real_clip_pull_twice_changes_nothing_and_repair_restores_a_corrupted_clip(cli, pulled_real, pinned_wheel,
                                                                                   clip_wheel):
    args = ("--source", pinned_wheel, "--clip-wheel", clip_wheel)
    clip = pulled_real / "resources/g1/motions/largebox.npz"
    before = (clip.stat().st_mtime_ns, sha256_file(clip))
    result = pull(cli, pulled_real, *args)
    assert result.code == 0 and "nothing changed" in result.out
    assert (clip.stat().st_mtime_ns, sha256_file(clip)) == before
    clip.write_bytes(clip.read_bytes()[:-10])
    result = pull(cli, pulled_real, *args)
    assert result.code == 2 and str(clip) in one_line(result.err) and "--repair" in result.err
    assert pull(cli, pulled_real, *args, "--repair").code == 0
    assert sha256_file(clip) == before[1]


def test_offline_without_the_clip_wheel_fails_closed(cli, tmp_path, pinned_wheel):
    cache = tmp_path / "resources/cache"
    cache.mkdir(parents=True)
    (cache / G1_WHEEL.filename).write_bytes(pinned_wheel.read_bytes())  # the robot is there, the clip is not
    result = pull(cli, tmp_path, "--clip", "largebox", env={"SOAKLAB_OFFLINE": "1"})
    assert result.code == 2
    line = one_line(result.err)
    assert "SOAKLAB_OFFLINE=1" in line and "holosoma==0.0.3" in line and "--clip synthetic" in line
    assert not (tmp_path / "manifest.json").exists() and not (tmp_path / "resources/g1").exists()


def clip_wheel_with(clip_wheel: Path, path: Path, edit) -> Path:
    """The pinned holosoma wheel's clip member rewritten by `edit(dict of arrays)`."""
    import io

    import numpy as np

    from soaklab.assets.clips import PUBLISHED_CLIPS

    name = PUBLISHED_CLIPS["largebox"].archive_name
    with zipfile.ZipFile(clip_wheel) as src:
        with np.load(io.BytesIO(src.read(name))) as npz:
            arrays = {k: npz[k] for k in npz.files}
    edit(arrays)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    with zipfile.ZipFile(path, "w") as dst:
        dst.writestr(name, buf.getvalue())
    return path


def test_a_clip_whose_names_do_not_cover_the_model_is_refused(cli, tmp_path, pinned_wheel, clip_wheel):
    def rename(arrays):
        names = arrays["joint_names"].copy()
        names[names.tolist().index("left_knee_joint")] = "left_knee"
        arrays["joint_names"] = names

    wheel = clip_wheel_with(clip_wheel, tmp_path / "renamed.whl", rename)
    result = pull(cli, tmp_path, "--source", pinned_wheel, "--clip-wheel", wheel)
    assert result.code == 2
    line = one_line(result.err)
    assert "do not cover the model" in line and "left_knee_joint" in line and str(wheel) in line
    assert not (tmp_path / "manifest.json").exists() and not (tmp_path / "resources/g1").exists()


def test_a_clip_for_another_body_is_refused(cli, tmp_path, pinned_wheel, clip_wheel):
    def shift(arrays):
        arrays["body_pos_w"] = arrays["body_pos_w"] + 0.2  # every body 35 cm from where the joints put it

    wheel = clip_wheel_with(clip_wheel, tmp_path / "shifted.whl", shift)
    result = pull(cli, tmp_path, "--source", pinned_wheel, "--clip-wheel", wheel)
    assert result.code == 2 and "another robot" in one_line(result.err)


def test_a_hostile_member_in_the_clip_wheel_is_refused(cli, tmp_path, pinned_wheel, clip_wheel):
    evil = tmp_path / "evil-clip.whl"
    with zipfile.ZipFile(clip_wheel) as src, zipfile.ZipFile(evil, "w") as dst:
        for item in src.infolist():
            if "motions/g1_29dof" in item.filename:
                dst.writestr(item, src.read(item))
        dst.writestr("holosoma/../../etc/evil", b"x")
    result = pull(cli, tmp_path, "--source", pinned_wheel, "--clip-wheel", evil)
    assert result.code == 2 and "parent-relative" in one_line(result.err)
    assert not (tmp_path / "resources/g1").exists()


def test_unknown_clip_and_missing_clip_wheel(cli, tmp_path):
    refused = pull(cli, tmp_path, "--clip", "walk")
    assert refused.code == 2 and "--clip: invalid choice: 'walk'" in one_line(refused.err)
    result = pull(cli, tmp_path, "--clip-wheel", tmp_path / "none.whl")
    assert result.code == 2 and "none.whl" in one_line(result.err)
