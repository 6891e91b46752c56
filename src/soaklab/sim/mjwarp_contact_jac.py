"""The deterministic mode's dense contact Jacobian in one dof block (mujoco_warp 4.0.0; docs/determinism.md).

mujoco_warp's dense contact Jacobian kernel runs one tile of `block_dim.contact_jac_tiled` dofs per
block (32 by default: two blocks for the G1's 48 padded dofs) and adds each constraint row's share of
J.qvel into `efc.Jqvel` with an atomic add per block. Under `opt.deterministic` it orders those adds
through warp's deterministic records, sized at njmax records for every thread of the launch and, in
a captured step, sorted in full on every replay: 1024 x 64 x 256 records per substep at 1024 G1
worlds, 26 of the 65 ms a captured deterministic control step took on an H100
(benchmarks/visits/2026-12-07-det-later/). With a tile as wide as the model's padded dofs there is
one block, so one add per row onto the array make_constraint has just zeroed: exact in any order,
so the kernel is built as in the default mode, without records (the same visit: still bit for bit
between two backends, 38.6 ms per control step).

`one_block` widens a model's tile and installs a factory in front of mujoco_warp's: it drops the
records only for a tile soaklab widened this way (each covers its model's padded dofs, and is wider
than the default tile, which no model of more dofs is given); any other launch is built as before.
"""

from __future__ import annotations

from typing import Any

WARP = 32  # a tile's width is a whole number of warps
MAX_TILE = 256  # wider tiles are left to the default blocks: a block of that many threads per world
_one_block_tiles: set[int] = set()
_original: list[Any] = []  # mujoco_warp's own factory, once replaced


def _factory(tile_size: int, cone_type: Any, njmax: int, deterministic: bool = False) -> Any:
    original = _original[0]
    if deterministic and tile_size in _one_block_tiles:
        return original(tile_size, cone_type, 0, False)  # one block: one add per row, onto zeros
    return original(tile_size, cone_type, njmax, deterministic)


def one_block(m: Any) -> int | None:
    """Give a deterministic dense model (mujoco_warp's `Model`) one dof block in its contact Jacobian;
    the tile width, or None where the model is sparse, its padded dofs fit the default tile already
    (it is one block, and its launch stays as mujoco_warp builds it) or exceed MAX_TILE."""
    from mujoco_warp._src import constraint

    tile = -(-m.nv_pad // WARP) * WARP
    if m.block_dim.contact_jac_tiled == tile and tile in _one_block_tiles:
        return tile  # given already
    if m.is_sparse or tile <= m.block_dim.contact_jac_tiled or tile > MAX_TILE:
        return None
    if constraint._efc_contact_jac_dense is not _factory:
        _original[:] = [constraint._efc_contact_jac_dense]
        constraint._efc_contact_jac_dense = _factory
    _one_block_tiles.add(tile)
    m.block_dim.contact_jac_tiled = tile
    return tile
