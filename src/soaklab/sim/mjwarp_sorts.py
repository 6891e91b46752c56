"""soaklab's contact and constraint-row sorts for mujoco_warp 4.0.0's deterministic mode (docs/determinism.md).

mujoco_warp 4.0.0 implements only the ATOMICS bit of `opt.deterministic`: its two other stages are
hooks whose bodies are `pass`. `collision_driver._sort_contacts(m, d)` runs at the end of
`collision()` (after the user contact filter) and `constraint._sort_constraints(m, d)` at the end of
`make_constraint`, each the last writer of its stage. Contacts are appended through an atomic counter
and constraint rows allocated through per-world atomic counters, so without a sort their order, and
every sum the solver makes over them, changes from run to run. `install` puts the two functions
below into those module attributes (the deterministic mode only; a default run installs nothing).

Both sort the whole capacity (`naconmax` contacts, `njmax` rows per world) with keys that put unused
slots last, so nothing reads `nacon` or `nefc` on the host: they run under CUDA graph capture. warp's
`radix_sort_pairs` is stable, so a sequence of passes from the least significant key to the most
significant gives a lexicographic order. Every field is then gathered through the permutation as
raw 32-bit words (every field of both pools is made of float32 and int32).
"""

from __future__ import annotations

import dataclasses
from importlib import metadata
from typing import Any

import warp as wp

from soaklab.catalogue import BACKENDS
from soaklab.errors import InvalidInput
from soaklab.host.determinism import version_tuple

INT64_MAX = wp.constant(wp.int64(9223372036854775807))
# The Constraint fields that hold one entry per row (axis 1: njmax, or njmax_pad), in a dense model.
# jtdaj_* are per JTDAJ block (sparse Newton), Ma is per dof, J_colind and a sparse J per non-zero.
ROW_FIELDS = ("type", "id", "J_rownnz", "J_rowadr", "J", "pos", "margin", "D", "vel", "aref",
              "frictionloss", "force", "state", "island", "Jqvel")
OTHER_FIELDS = ("jtdaj_adr", "jtdaj_nrow", "jtdaj_nblock", "J_colind", "Ma")


@wp.kernel(module="unique", enable_backward=False)
def _iota(values: wp.array(dtype=wp.int32)):
    i = wp.tid()
    values[i] = i


@wp.kernel(module="unique", enable_backward=False)
def _contact_pair_key(nacon: wp.array(dtype=wp.int32), worldid: wp.array(dtype=wp.int32),
                      geom: wp.array2d(dtype=wp.int32), ngeom1: wp.int64,
                      keys: wp.array(dtype=wp.int64), values: wp.array(dtype=wp.int32)):
    """Most significant: (world, geom pair); slots at or past nacon last (geoms are -1 for flex)."""
    i = wp.tid()
    c = values[i]
    if c >= wp.min(nacon[0], worldid.shape[0]):
        keys[i] = INT64_MAX
    else:
        g0 = wp.int64(geom[c, 0] + 1)
        g1 = wp.int64(geom[c, 1] + 1)
        keys[i] = (wp.int64(worldid[c]) * ngeom1 + g0) * ngeom1 + g1


@wp.kernel(module="unique", enable_backward=False)
def _bits_key(words_a: wp.array2d(dtype=wp.int32), col_a: int, words_b: wp.array2d(dtype=wp.int32), col_b: int,
              keys: wp.array(dtype=wp.int64), values: wp.array(dtype=wp.int32)):
    """A tie-breaker: two 32-bit words of the contact's own values, as one 64-bit key."""
    i = wp.tid()
    c = values[i]
    hi = wp.int64(words_a[c, col_a])
    lo = wp.int64(words_b[c, col_b]) & wp.int64(4294967295)
    keys[i] = (hi << wp.int64(32)) | lo


@wp.kernel(module="unique", enable_backward=False)
def _gather_rows(order: wp.array(dtype=wp.int32), src: wp.array2d(dtype=wp.int32), dst: wp.array2d(dtype=wp.int32)):
    i, j = wp.tid()
    dst[i, j] = src[order[i], j]


@wp.kernel(module="unique", enable_backward=False)
def _efc_key(nefc: wp.array(dtype=wp.int32), efc_type: wp.array2d(dtype=wp.int32),
             efc_id: wp.array2d(dtype=wp.int32), keys: wp.array(dtype=wp.int64), values: wp.array(dtype=wp.int32)):
    """(world, type, object id); a world's rows at or past nefc last. Rows of one (type, id) are
    allocated as one contiguous block by one thread in 4.0.0 (one atomic_add per block), so the
    stable sort keeps them in their own order."""
    w, r = wp.tid()
    njmax = efc_type.shape[1]
    i = w * njmax + r
    values[i] = i
    key = wp.int64(w) << wp.int64(40)
    if r >= wp.min(nefc[w], njmax):
        keys[i] = key | (wp.int64(255) << wp.int64(32))
    else:
        keys[i] = key | (wp.int64(efc_type[w, r]) << wp.int64(32)) | (wp.int64(efc_id[w, r]) & wp.int64(4294967295))


@wp.kernel(module="unique", enable_backward=False)
def _efc_source(values: wp.array(dtype=wp.int32), njmax: int, src_row: wp.array2d(dtype=wp.int32),
                new_row: wp.array2d(dtype=wp.int32)):
    """The sorted global order as per-world rows: row r takes old row src_row[w, r]; new_row inverts it."""
    w, r = wp.tid()
    old = values[w * njmax + r] - w * njmax
    src_row[w, r] = old
    new_row[w, old] = r


@wp.kernel(module="unique", enable_backward=False)
def _gather_efc(src_row: wp.array2d(dtype=wp.int32), src: wp.array3d(dtype=wp.int32), dst: wp.array3d(dtype=wp.int32)):
    w, r, j = wp.tid()
    dst[w, r, j] = src[w, src_row[w, r], j]


@wp.kernel(module="unique", enable_backward=False)
def _remap_efc_address(nacon: wp.array(dtype=wp.int32), worldid: wp.array(dtype=wp.int32),
                       new_row: wp.array2d(dtype=wp.int32), efc_address: wp.array2d(dtype=wp.int32)):
    c, k = wp.tid()
    if c >= wp.min(nacon[0], worldid.shape[0]):
        return
    adr = efc_address[c, k]
    if adr >= 0 and adr < new_row.shape[1]:
        efc_address[c, k] = new_row[worldid[c], adr]


@wp.kernel(module="unique", enable_backward=False)
def _row_nnz(nefc: wp.array(dtype=wp.int32), rownnz: wp.array2d(dtype=wp.int32), counts: wp.array(dtype=wp.int32)):
    w, r = wp.tid()
    njmax = rownnz.shape[1]
    counts[w * njmax + r] = wp.where(r < wp.min(nefc[w], njmax), rownnz[w, r], 0)


@wp.kernel(module="unique", enable_backward=False)
def _compact_nnz(nefc: wp.array(dtype=wp.int32), rownnz: wp.array2d(dtype=wp.int32), offsets: wp.array(dtype=wp.int32),
                 src_j: wp.array3d(dtype=wp.int32), src_colind: wp.array3d(dtype=wp.int32),
                 rowadr: wp.array2d(dtype=wp.int32), j: wp.array3d(dtype=wp.int32), colind: wp.array3d(dtype=wp.int32)):
    """A sparse Jacobian's non-zeros laid out in row order (offsets: the exclusive scan of every
    row's count): their storage is reserved through an atomic counter, so its layout is racy too. A
    block's rows stay adjacent, as the solver's JTDAJ blocks and cones read them (head address +
    k * row non-zeros)."""
    w, r = wp.tid()
    njmax = rownnz.shape[1]
    if r >= wp.min(nefc[w], njmax):
        return
    adr = offsets[w * njmax + r] - offsets[w * njmax]
    old = rowadr[w, r]
    for k in range(rownnz[w, r]):
        j[w, 0, adr + k] = src_j[w, 0, old + k]
        colind[w, 0, adr + k] = src_colind[w, 0, old + k]
    rowadr[w, r] = adr


@wp.kernel(module="unique", enable_backward=False)
def _jtdaj_key(nblock: wp.array(dtype=wp.int32), new_row: wp.array2d(dtype=wp.int32),
               adr: wp.array2d(dtype=wp.int32), keys: wp.array(dtype=wp.int64), values: wp.array(dtype=wp.int32)):
    """The JTDAJ blocks (sparse Newton) by their first row after the row sort; unused blocks last."""
    w, b = wp.tid()
    njmax = adr.shape[1]
    i = w * njmax + b
    values[i] = i
    key = wp.int64(w) << wp.int64(40)
    if b >= wp.min(nblock[w], njmax):
        keys[i] = key | wp.int64(4294967295)
    else:
        head = new_row[w, adr[w, b]]
        adr[w, b] = head
        keys[i] = key | wp.int64(head)


@wp.kernel(module="unique", enable_backward=False)
def _remap_rows(new_row: wp.array2d(dtype=wp.int32), rows: wp.array2d(dtype=wp.int32)):
    """A per-world back-reference into the rows (dof_frictionadr): -1 stays -1."""
    w, k = wp.tid()
    row = rows[w, k]
    if row >= 0 and row < new_row.shape[1]:
        rows[w, k] = new_row[w, row]


def _words(a: Any, lead: int) -> Any:
    """`a` as int32 words, its first `lead` axes kept and the rest flattened (the same storage)."""
    if not a.is_contiguous or wp.types.type_size_in_bytes(a.dtype) % 4:
        raise ValueError(f"cannot view a {a.dtype} array of shape {a.shape} as 32-bit words")
    shape = tuple(a.shape[:lead])
    cells = 1
    for n in a.shape[lead:]:
        cells *= n
    width = cells * wp.types.type_size_in_bytes(a.dtype) // 4
    return wp.array(ptr=a.ptr, shape=(*shape, width), dtype=wp.int32, device=a.device, copy=False)


def _gather(words: Any, order: Any) -> None:
    """words[i] = old words[order[i]] for every slot of a [n, width] view."""
    if words.shape[1] == 0:
        return
    src = wp.clone(words)
    wp.launch(_gather_rows, dim=words.shape, inputs=[order, src], outputs=[words], device=words.device)


def _gather_world_rows(words: Any, src_row: Any) -> None:
    """words[w, r] = old words[w, src_row[w, r]] for r < njmax, of a [nworld, rows, width] view."""
    if words.shape[2] == 0:
        return
    src = wp.clone(words)
    wp.launch(_gather_efc, dim=(src_row.shape[0], src_row.shape[1], words.shape[2]), inputs=[src_row, src],
              outputs=[words], device=words.device)


def sort_contacts(m: Any, d: Any) -> None:
    """The contact pool in a canonical order: (world, geom pair, dist, pos), every field permuted."""
    n = d.naconmax
    if n == 0:
        return
    c = d.contact
    dev = c.dist.device
    keys = wp.empty(2 * n, dtype=wp.int64, device=dev)
    values = wp.empty(2 * n, dtype=wp.int32, device=dev)
    wp.launch(_iota, dim=n, outputs=[values], device=dev)
    dist, pos = _words(c.dist, 1), _words(c.pos, 1)
    for words_a, col_a, words_b, col_b in ((pos, 1, pos, 2), (dist, 0, pos, 0)):  # least significant first
        wp.launch(_bits_key, dim=n, inputs=[words_a, col_a, words_b, col_b], outputs=[keys, values], device=dev)
        wp.utils.radix_sort_pairs(keys, values, n)
    wp.launch(_contact_pair_key, dim=n, inputs=[d.nacon, c.worldid, _words(c.geom, 1), wp.int64(m.ngeom + 1)],
              outputs=[keys, values], device=dev)
    wp.utils.radix_sort_pairs(keys, values, n)
    for field in dataclasses.fields(c):
        array = getattr(c, field.name)
        if array.shape[0] == n:  # surfacevel is empty in a model without surface velocities
            _gather(_words(array, 1), values)


def sort_constraints(m: Any, d: Any) -> None:
    """Each world's constraint rows in a canonical order: (type, object id), every per-row field
    permuted, contact.efc_address and dof_frictionadr remapped. The type order keeps MuJoCo's blocks
    (equality, friction, limit, contact), so ne, nf, nl and nefc stay as they are."""
    nworld, njmax = d.nworld, d.njmax
    if njmax == 0 or nworld == 0:
        return
    e = d.efc
    dev = e.type.device
    total = nworld * njmax
    keys = wp.empty(2 * total, dtype=wp.int64, device=dev)
    values = wp.empty(2 * total, dtype=wp.int32, device=dev)
    wp.launch(_efc_key, dim=(nworld, njmax), inputs=[d.nefc, e.type, e.id], outputs=[keys, values], device=dev)
    wp.utils.radix_sort_pairs(keys, values, total)
    src_row = wp.empty((nworld, njmax), dtype=wp.int32, device=dev)
    new_row = wp.empty((nworld, njmax), dtype=wp.int32, device=dev)
    wp.launch(_efc_source, dim=(nworld, njmax), inputs=[values, njmax], outputs=[src_row, new_row], device=dev)
    for name in ROW_FIELDS:
        array = getattr(e, name)
        if array.ndim < 2 or array.shape[1] < njmax or (name == "J" and m.is_sparse):
            continue  # dense: J_rownnz and J_rowadr are (nworld, 0); sparse: J holds non-zeros
        _gather_world_rows(_words(array, 2), src_row)
    if d.dof_frictionadr.size:  # each dof's friction row (the solver reads it)
        wp.launch(_remap_rows, dim=d.dof_frictionadr.shape, inputs=[new_row], outputs=[d.dof_frictionadr], device=dev)
    if d.naconmax:
        c = d.contact
        wp.launch(_remap_efc_address, dim=c.efc_address.shape, inputs=[d.nacon, c.worldid, new_row],
                  outputs=[c.efc_address], device=dev)
    if m.is_sparse:
        j, colind = _words(e.J, 2), _words(e.J_colind, 2)
        counts, offsets = (wp.empty(total, dtype=wp.int32, device=dev) for _ in range(2))
        wp.launch(_row_nnz, dim=(nworld, njmax), inputs=[d.nefc, e.J_rownnz], outputs=[counts], device=dev)
        wp.utils.array_scan(counts, offsets, inclusive=False)
        wp.launch(_compact_nnz, dim=(nworld, njmax),
                  inputs=[d.nefc, e.J_rownnz, offsets, wp.clone(j), wp.clone(colind)],
                  outputs=[e.J_rowadr, j, colind], device=dev)
        # JTDAJ blocks: their first rows renumbered, then the blocks in row order (the solver sums
        # the Hessian block by block)
        wp.launch(_jtdaj_key, dim=(nworld, njmax), inputs=[e.jtdaj_nblock, new_row],
                  outputs=[e.jtdaj_adr, keys, values], device=dev)
        wp.utils.radix_sort_pairs(keys, values, total)
        wp.launch(_efc_source, dim=(nworld, njmax), inputs=[values, njmax], outputs=[src_row, new_row], device=dev)
        for array in (e.jtdaj_adr, e.jtdaj_nrow):
            _gather_world_rows(_words(array, 2), src_row)


def check_version() -> str:
    """The installed mujoco-warp's version, refused in one line unless it is the release these sorts
    (and the backend's layout rule) follow: the catalogue's deterministic_exact, also checked when the
    config is resolved."""
    pinned = dict(BACKENDS["mjwarp"].deterministic_exact)["mujoco-warp"]
    version = metadata.version("mujoco-warp")
    if version_tuple(version) != version_tuple(pinned):
        raise InvalidInput(f"training.deterministic=true: soaklab's contact and constraint sorts follow "
                           f"mujoco-warp {pinned}; found mujoco-warp {version}: install mujoco-warp=={pinned} "
                           "or set training.deterministic=false")
    return version


def install(mjw: Any, m: Any) -> None:
    """Put the two sorts into mujoco_warp's hooks (idempotent). Refused, in one line, on another
    mujoco_warp than the one whose hook names and layouts they follow."""
    version = check_version()
    if m.nflex:  # flex equality blocks keep row addresses of their own, which this sort does not follow
        raise InvalidInput("training.deterministic=true: soaklab's constraint sort does not handle flex bodies "
                           f"(this model has {m.nflex}): set training.deterministic=false")
    from mujoco_warp._src import collision_driver, constraint, types

    names = {f.name for f in dataclasses.fields(types.Constraint)}
    if names != set(ROW_FIELDS) | set(OTHER_FIELDS):  # a layout this module does not know
        raise InvalidInput(f"training.deterministic=true: mujoco-warp {version}'s constraint rows hold "
                           f"{sorted(names)}, not the fields soaklab's sort permutes: set training.deterministic=false")
    collision_driver._sort_contacts = sort_contacts
    constraint._sort_constraints = sort_constraints
