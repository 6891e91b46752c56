"""A clip's terrain: a published OBJ read as hostile input, split into convex pieces, and added
to the G1 scene for the runs that track that clip (docs/assets-and-tasks.md).

holosoma ships `terrain_slope.obj` beside `motion_crawl_slope.npz`: three boxes (a ramp, the
platform it leads to, and a ground slab level with the floor). MuJoCo collides a mesh geom
through its convex hull, so one mesh of the whole file would be one big block: each connected
set of faces becomes its own mesh geom instead, written inline into the scene (no file path
to resolve). A piece that lies wholly at or below z = 0 is the floor again and is left out: its
contacts would only double the floor's (and MJWarp keeps a fixed number of contacts per world).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from soaklab.assets import g1
from soaklab.assets.scene import build_scene_spec
from soaklab.errors import InvalidInput

MAX_TERRAIN_BYTES = 4 << 20  # the published terrain is 1.3 kB; refuse to read anything this large
MAX_VERTICES = 100_000
MAX_EXTENT_M = 100.0  # a tracking scene is a few metres across
FLOOR_EPS_M = 1e-6


@dataclass(frozen=True)
class TerrainPiece:
    vertices: np.ndarray  # [V, 3] float64
    faces: np.ndarray  # [F, 3] int, indices into vertices


def parse_obj(raw: bytes, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Vertices [V, 3] and triangles [F, 3] (0-based; polygons fanned) of an OBJ; anything else in
    it is refused except comments, object/group names, smoothing groups and materials (ignored)."""
    if len(raw) > MAX_TERRAIN_BYTES:
        raise InvalidInput(f"{where}: {len(raw)} bytes (limit {MAX_TERRAIN_BYTES}): not a terrain")
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise InvalidInput(f"{where}: not an ASCII OBJ file") from None
    vertices: list[list[float]] = []
    faces: list[list[int]] = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#") or words[0] in ("o", "g", "s", "usemtl", "mtllib"):
            continue
        try:
            if words[0] == "v" and len(words) in (4, 7):  # x y z [r g b]
                vertices.append([float(w) for w in words[1:4]])
                continue
            if words[0] == "f" and len(words) >= 4:  # a polygon: fanned into triangles
                corners = [int(w.split("/")[0]) for w in words[1:]]
                faces.extend([corners[0], a, b] for a, b in zip(corners[1:-1], corners[2:], strict=True))
                continue
        except ValueError:
            pass
        raise InvalidInput(f"{where}:{number}: not a vertex or triangle line: {line.strip()[:60]!r}")
    if not vertices or not faces:
        raise InvalidInput(f"{where}: no vertices or no triangles")
    if len(vertices) > MAX_VERTICES:
        raise InvalidInput(f"{where}: {len(vertices)} vertices (limit {MAX_VERTICES})")
    v = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces, dtype=np.int64)
    if not np.isfinite(v).all() or np.abs(v).max() > MAX_EXTENT_M:
        raise InvalidInput(f"{where}: vertices must be finite and within {MAX_EXTENT_M:g} m of the origin")
    if f.min() < 1 or f.max() > len(v):
        raise InvalidInput(f"{where}: a face names vertex {int(f.min()) if f.min() < 1 else int(f.max())}; "
                           f"the file has vertices 1..{len(v)} (negative indices are not read)")
    return v, f - 1


def split_pieces(vertices: np.ndarray, faces: np.ndarray) -> list[TerrainPiece]:
    """Connected sets of faces (sharing a vertex), each with its own vertices, in file order."""
    parent = list(range(len(vertices)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b, c in faces:
        for x in (b, c):
            ra, rx = root(int(a)), root(int(x))
            if ra != rx:
                parent[rx] = ra
    groups: dict[int, list[int]] = {}
    for index, face in enumerate(faces):
        groups.setdefault(root(int(face[0])), []).append(index)
    pieces = []
    for members in groups.values():
        used = np.unique(faces[members])
        remap = {int(old): new for new, old in enumerate(used)}
        pieces.append(TerrainPiece(vertices[used], np.array([[remap[int(i)] for i in faces[k]] for k in members])))
    return pieces


def terrain_pieces(raw: bytes, where: str) -> list[TerrainPiece]:
    """The pieces of a terrain file that stand above the floor; each must enclose a volume."""
    pieces = [p for p in split_pieces(*parse_obj(raw, where)) if p.vertices[:, 2].max() > FLOOR_EPS_M]
    if not pieces:
        raise InvalidInput(f"{where}: every piece lies at or below the floor (z <= 0): nothing to add")
    for number, piece in enumerate(pieces, 1):
        if len(piece.vertices) < 4 or np.linalg.matrix_rank(piece.vertices - piece.vertices[0]) < 3:
            raise InvalidInput(f"{where}: piece {number} is flat or degenerate; a terrain piece must be a solid")
    return pieces


def add_terrain(spec: mujoco.MjSpec, pieces: list[TerrainPiece], name: str) -> None:
    """One inline mesh and one static geom per piece, colliding like the floor."""
    for number, piece in enumerate(pieces):
        mesh = spec.add_mesh(name=f"{name}_{number}")
        mesh.uservert = piece.vertices.astype(np.float64).reshape(-1).tolist()
        mesh.userface = piece.faces.astype(np.int32).reshape(-1).tolist()
        spec.worldbody.add_geom(
            name=f"{name}_{number}", type=mujoco.mjtGeom.mjGEOM_MESH, meshname=mesh.name,
            condim=g1.OTHER_CONDIM, friction=[g1.FOOT_FRICTION, 0.005, 0.0001], contype=1, conaffinity=1,
        )


def write_terrain_scene(robot_xml: Path, clip: str, pieces: list[TerrainPiece]) -> Path:
    """`scene_<clip>.xml` beside scene.xml: the same scene with the clip's terrain in it."""
    spec = build_scene_spec(robot_xml)
    spec.modelname = f"g1_scene_{clip}"
    add_terrain(spec, pieces, f"terrain_{clip}")
    spec.compile()
    out = robot_xml.parent / f"scene_{clip}.xml"
    out.write_text(spec.to_xml())
    return out
