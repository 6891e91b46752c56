"""scripts/gpu/mjw_g1.py, issue 68's point on mujoco_warp's public curve: the staged folder, the wheel
and --work are another's files. A SOURCE.json naming other files (a path out of the folder among
them), a staged file changed or linked away, an __init__.py that would run code if it were run or
names files outside the folder, a wheel that is not the pin, and a --work this script did not make are
each refused in one line, exit 2, before anything is copied; upstream's __init__.py is only parsed."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import zipfile
from pathlib import Path

import pytest

from soaklab.errors import InvalidInput
from tests.conftest import REPO

# A driver run as a file from scripts/gpu/, not a module of the package: loaded by its path.
_spec = importlib.util.spec_from_file_location("mjw_g1", REPO / "scripts" / "gpu" / "mjw_g1.py")
assert _spec is not None and _spec.loader is not None
mjw_g1 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mjw_g1)

# upstream's benchmarks/unitree_g1/__init__.py in shape, and one that runs code if it is ever run
UPSTREAM = """ASSETS = [{"source": "https://github.com/google-deepmind/mujoco_menagerie.git", "ref": "affef08"}]
BENCHMARKS = [
  {"name": "unitree_g1_flat", "mjcf": "scene_flat.xml", "nworld": 8192, "nconmax": 48, "njmax": 192,
   "replay": "shuffle_dance.npz", "assets": [(ASSETS[0], "unitree_g1/assets", "assets")]},
]
"""
RUNS_CODE = """import pathlib
pathlib.Path({marker!r}).touch()
BENCHMARKS = [{{"name": "unitree_g1_flat", "mjcf": "../../outside.xml", "nworld": 8,
               "replay": __import__("pathlib").Path({marker!r}).touch()}}]
"""


def stage(folder: Path, init_py: str = UPSTREAM, digests: dict[str, str] | None = None) -> Path:
    """A staged folder as stage_mjw_g1.sh writes it: the four files and their SOURCE.json."""
    folder.mkdir()
    for name in mjw_g1.STAGED:
        (folder / name).write_text(init_py if name == "__init__.py" else f"<{name}/>")
    sums = {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in mjw_g1.STAGED}
    (folder / "SOURCE.json").write_text(json.dumps({"commit": "f76464f", "sha256": digests or sums}))
    return folder


def test_a_staged_folder_is_read_as_staged_and_nothing_outside_it(tmp_path):
    good = stage(tmp_path / "good")
    assert sorted(mjw_g1.read_source(good)["sha256"]) == sorted(mjw_g1.STAGED)
    assert mjw_g1.settings(good / "__init__.py") == {
        "name": "unitree_g1_flat", "mjcf": "scene_flat.xml", "nworld": 8192, "nconmax": 48, "njmax": 192,
        "replay": "shuffle_dance.npz"}  # its plain values: the assets' tuple is not one
    outside = tmp_path / "outside.txt"
    outside.write_text("not staged")
    sums = json.loads((good / "SOURCE.json").read_text())["sha256"]
    traversal = {**sums, "../outside.txt": hashlib.sha256(outside.read_bytes()).hexdigest()}
    with pytest.raises(InvalidInput, match=r"SOURCE.json: sha256 must name exactly scene_flat.xml"):
        mjw_g1.read_source(stage(tmp_path / "traversal", digests=traversal))
    (tmp_path / "malformed").mkdir()
    (tmp_path / "malformed" / "SOURCE.json").write_text('{"sha256": ')
    with pytest.raises(InvalidInput, match=r"malformed/SOURCE.json: unreadable \("):
        mjw_g1.read_source(tmp_path / "malformed")
    linked = stage(tmp_path / "linked")
    (linked / "shuffle_dance.npz").unlink()
    (linked / "shuffle_dance.npz").symlink_to(outside)
    with pytest.raises(InvalidInput, match="shuffle_dance.npz: missing, or not a plain file"):
        mjw_g1.read_source(linked)
    changed = stage(tmp_path / "changed")
    (changed / "scene_flat.xml").write_text("<mujoco/>")
    with pytest.raises(InvalidInput, match="scene_flat.xml: not the file stage_mjw_g1.sh staged"):
        mjw_g1.read_source(changed)
    marker = tmp_path / "it-ran"
    with pytest.raises(InvalidInput, match=r"unitree_g1_flat's mjcf is '../../outside.xml', not the staged"):
        mjw_g1.settings(stage(tmp_path / "code", RUNS_CODE.format(marker=str(marker))) / "__init__.py")
    assert not marker.exists()  # parsed, never run
    for i, (bad, words) in enumerate((('"8192"', "nworld is '8192', not a positive integer"),
                                      ("True", "nworld is True"), ("0", "nworld is 0"))):
        folder = stage(tmp_path / f"nworld{i}", UPSTREAM.replace('"nworld": 8192', f'"nworld": {bad}'))
        with pytest.raises(InvalidInput, match=words):
            mjw_g1.settings(folder / "__init__.py")
    (good / "__init__.py").write_text("BENCHMARKS = [")
    with pytest.raises(InvalidInput, match=r"__init__.py: not upstream's benchmark list \(SyntaxError"):
        mjw_g1.settings(good / "__init__.py")


def test_the_wheel_and_work_folder_are_refused_in_one_line_before_anything_is_copied(tmp_path, monkeypatch,
                                                                                       capsys):
    staged = stage(tmp_path / "staged")
    cache = tmp_path / "resources" / "assets" / "cache"
    cache.mkdir(parents=True)
    with zipfile.ZipFile(cache / "mjlab-1.6.0-py3-none-any.whl", "w") as zf:  # the pin's name, not its bytes
        zf.writestr(mjw_g1.MESHES + "../../../../escaped.STL", b"solid")
        zf.writestr("/absolute.STL", b"solid")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("someone's")
    monkeypatch.chdir(tmp_path)

    def refused(*argv: str) -> str:
        monkeypatch.setattr(sys, "argv", ["mjw_g1.py", "--staged", str(staged), "--dry-run",
                                          "--out", str(tmp_path / "out.json"), *argv])
        assert mjw_g1.main() == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("mjw_g1: "), err
        return err

    assert "mjlab-1.6.0-py3-none-any.whl: not the pinned wheel (sha256 differs" in refused(
        "--work", str(tmp_path / "work"))
    assert not (tmp_path / "work").exists() and not list(tmp_path.rglob("*escaped*"))
    assert "out.json: its folder" in refused("--work", str(mine), "--out", str(tmp_path / "no" / "out.json"))
    with pytest.raises(InvalidInput, match=r"--work .*mine: a folder this script did not make"):
        mjw_g1.fresh_work(mine)
    made = tmp_path / "made"
    mjw_g1.fresh_work(made)
    (made / "assets" / "old.STL").write_text("from a run before")
    mjw_g1.fresh_work(made)  # its own folder: emptied for the next run
    assert sorted(p.name for p in made.rglob("*")) == [mjw_g1.WORK_MARK, "assets"]
    assert (mine / "keep.txt").read_text() == "someone's"  # never emptied


def test_a_staged_scene_that_names_a_file_outside_the_folder_is_refused_before_mujoco_reads_it(tmp_path):
    (tmp_path / "secret.xml").write_text("<mujoco/>")
    plain = tmp_path / "plain.xml"
    plain.write_text('<mujoco><compiler meshdir="assets"/><include file="unitree_g1_mjlab.xml"/>'
                     '<asset><mesh file="pelvis.STL"/></asset></mujoco>')
    mjw_g1.check_references(plain)
    for i, bad in enumerate(('<include file="../secret.xml"/>', f'<include file="{tmp_path}/secret.xml"/>',
                             '<compiler meshdir="/etc"/>', '<asset><mesh file="a/../../x.STL"/></asset>',
                             # a cube texture's sides are files too (fileright, fileleft, fileup, ...)
                             '<asset><texture type="skybox" fileright="a.png" fileleft="/etc/passwd"/></asset>',
                             '<asset><mesh file="pelvis.STL&#10;"/></asset>')):  # the whole value: no newline
        scene = tmp_path / f"bad{i}.xml"
        scene.write_text(f"<mujoco>{bad}</mujoco>")
        with pytest.raises(InvalidInput, match=r"names a path outside the benchmark's folder"):
            mjw_g1.check_references(scene)
    (tmp_path / "broken.xml").write_text("<mujoco>")
    with pytest.raises(InvalidInput, match=r"broken.xml: not an MJCF file"):
        mjw_g1.check_references(tmp_path / "broken.xml")
