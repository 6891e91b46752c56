"""A clip's terrain: the published OBJ split into solid pieces above the floor, added to the scene
of the runs that track the clip; hostile or malformed files refused in one line."""

from __future__ import annotations

import zipfile

import mujoco
import numpy as np
import pytest

from soaklab.assets.clips import PUBLISHED_CLIPS
from soaklab.assets.terrain import MAX_TERRAIN_BYTES, terrain_pieces
from soaklab.errors import InvalidInput

BOX = """# a unit box standing on the floor
v 0 0 0
v 1 0 0
v 1 1 0
v 0 1 0
v 0 0 1
v 1 0 1
v 1 1 1
v 0 1 1
f 1 2 3
f 1 3 4
f 5 6 7
f 5 7 8
f 1 2 6
f 1 6 5
f 4 3 7
f 4 7 8
"""
SLAB = "".join(f"v {x} {y} {z}\n" for x in (-5, 5) for y in (-5, 5) for z in (-0.1, 0.0)) + \
    "f 9 10 11\nf 10 11 12\nf 13 14 15\nf 14 15 16\n"


def test_the_published_terrain_gives_the_ramp_and_the_platform_and_drops_the_floor_slab(clip_wheel):
    clip = PUBLISHED_CLIPS["crawl_slope"]
    with zipfile.ZipFile(clip_wheel) as zf:
        raw = zf.read(clip.terrain_archive_name)
    pieces = terrain_pieces(raw, "terrain_slope.obj")
    assert len(pieces) == 2  # three boxes in the file; the slab level with the floor is left out
    tops = sorted(round(float(p.vertices[:, 2].max()), 2) for p in pieces)
    assert tops == [0.41, 0.41]
    assert all(p.vertices.shape == (8, 3) and p.faces.max() < 8 for p in pieces)


def test_polygons_are_fanned_into_triangles():
    quads = BOX.split("f ")[0] + "f 1 2 3 4\nf 5 6 7 8\nf 1 2 6 5\nf 4 3 7 8\n"
    (piece,) = terrain_pieces(quads.encode(), "t.obj")
    assert piece.faces.shape == (8, 3)


def test_a_box_beside_a_floor_slab_keeps_only_the_box():
    pieces = terrain_pieces((BOX + SLAB).encode(), "t.obj")
    assert len(pieces) == 1 and pieces[0].vertices[:, 2].max() == 1.0


@pytest.mark.parametrize(("text", "words"), [
    (BOX.replace("v 1 1 1", "v 1 1 nan"), "finite"),
    (BOX.replace("v 1 1 1", "v 1 1 1000"), "within 100 m"),
    (BOX + "f 1 2 99\n", "names vertex 99"),
    (BOX + "f 1 2 -1\n", "names vertex -1"),
    (BOX + "f 1 2\n", "t.obj:18: not a vertex or triangle line"),
    (BOX + "curv 1 2\n", "not a vertex or triangle line"),
    ("# nothing\n", "no vertices or no triangles"),
    (SLAB.replace("f 9 10 11\nf 10 11 12\nf 13 14 15\nf 14 15 16\n", "f 1 2 3\nf 2 3 4\nf 5 6 7\nf 6 7 8\n"),
     "at or below the floor"),
    ("v 0 0 1\nv 1 0 1\nv 0 1 1\nv 1 1 1\nf 1 2 3\nf 2 3 4\n", "flat or degenerate"),
])
def test_a_malformed_terrain_is_refused_in_one_line(text, words):
    with pytest.raises(InvalidInput) as info:
        terrain_pieces(text.encode(), "t.obj")
    assert words in str(info.value) and "\n" not in str(info.value)


def test_binary_or_oversized_files_are_refused_before_parsing():
    with pytest.raises(InvalidInput, match="not an ASCII OBJ"):
        terrain_pieces(b"\x89PNG\r\n\x1a\n" + bytes(range(256)), "t.obj")
    with pytest.raises(InvalidInput, match="limit"):
        terrain_pieces(b"#" * (MAX_TERRAIN_BYTES + 1), "t.obj")


def test_the_pull_records_the_terrain_and_its_scene_and_the_clip_stands_on_it(g1_assets):
    entry = g1_assets.manifest["motions"]["crawl_slope"]
    assert entry["terrain"]["member"].endswith("terrain_slope.obj") and entry["terrain"]["pieces"] == 2
    model = mujoco.MjModel.from_xml_path(entry["scene"]["path"])
    names = [model.geom(i).name for i in range(model.ngeom)]
    assert [n for n in names if n.startswith("terrain_")] == ["terrain_crawl_slope_0", "terrain_crawl_slope_1"]
    assert "terrain" not in g1_assets.manifest["motions"]["largebox"]
    # Late in the clip the robot is up on the platform: above the bare floor it touches nothing,
    # on the terrain it stands (contacts at about the depth its crawl has on the floor).
    from soaklab.assets.motion import load_motion

    plain = mujoco.MjModel.from_xml_path(str(g1_assets.scene))
    clip = load_motion(__import__("pathlib").Path(entry["path"]), model)
    frame = clip.num_frames - 1
    for scene, touching in ((model, True), (plain, False)):
        data = mujoco.MjData(scene)
        data.qpos[:3], data.qpos[3:7] = clip.body_pos_w[frame, 0], clip.body_quat_w[frame, 0]
        data.qpos[7:] = clip.joint_pos[frame]
        mujoco.mj_forward(scene, data)
        assert (data.ncon > 0) is touching
        if touching:
            assert min(data.contact[i].dist for i in range(data.ncon)) > -0.02
    assert np.isfinite(clip.body_pos_w).all()
