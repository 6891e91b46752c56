"""The deterministic mode's launches whose float adds the model makes exact in any order (mujoco_warp
4.0.0; docs/determinism.md).

Under `opt.deterministic` mujoco_warp builds every kernel that adds floats atomically with warp's
ordered records, sized for the worst case and, in a captured step, sorted in full on every replay.
For three launches of the G1's step the model proves the order cannot change a bit:

- the actuator forces (`forward._qfrc_actuator`, into the zeroed `qfrc_actuator`) and their velocity
  derivative (`derivative._qderiv_actuator_passive_actuation_sparse`, into qDeriv's M-shaped rows):
  where every actuator drives one hinge or slide joint through a joint transmission (a moment row of
  one entry, mujoco_warp's `_transmission`) and no two drive the same joint, each address of either
  launch takes at most one add: one rounding, whatever the order. The derivative's records were
  nworld x nu x nM per launch (10.1 M at 1024 G1 worlds, four launches per control step), the largest
  of the ordered reductions left after the contact Jacobian's (mjwarp_contact_jac);
- gravity compensation (`passive._gravity_force`): with no body's `gravcomp` set the kernel adds
  nothing, yet its records (nworld x nbody x nv) were sorted all the same.

`install(model)` checks those conditions on the MuJoCo model a backend is built from and puts a
factory in front of each of mujoco_warp's: a deterministic launch whose key (the factory's argument:
nv, nM, or none) every model of the process has proved is built as in the default mode, without
records; any other launch as before. A key stays refused once a model that does not prove it was
built in the process, so a launch never loses its records on another model's proof (a graph captured
earlier keeps the kernels it was captured with, each exact for its own model). The proof is read from
the MuJoCo model at build time: code that later writes the device model's actuator transmissions or
`body_gravcomp` (per-world randomization, say; nothing in soaklab does) must build a model that
proves its own values, or leave the mode off.

A proved launch differs from its records version only below 2^-121: warp's binned accumulator rounds a
lone add that small, the plain add keeps it (benchmarks/visits/2026-12-07-det-fresh/: `adds` compares
the captured step's bits with and without).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

_proved: dict[str, set[Any]] = {"qfrc_actuator": set(), "qderiv_actuation": set(), "gravity_force": set()}
_refused: dict[str, set[Any]] = {name: set() for name in _proved}
_originals: dict[str, Callable[..., Any]] = {}


def one_add_per_dof(model: mujoco.MjModel) -> bool:
    """Whether each dof takes at most one actuator's force: every actuator drives one hinge or slide
    joint through a joint transmission (a one-entry moment row), and no two the same joint."""
    joint_types = (mujoco.mjtTrn.mjTRN_JOINT, mujoco.mjtTrn.mjTRN_JOINTINPARENT)
    one_dof = (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)
    if model.nu == 0:
        return True
    if not all(int(t) in joint_types for t in model.actuator_trntype):
        return False
    joints = model.actuator_trnid[:, 0]
    return bool(all(int(model.jnt_type[j]) in one_dof for j in joints) and len(set(joints.tolist())) == len(joints))


def no_gravcomp(model: mujoco.MjModel) -> bool:
    """Whether no body is gravity-compensated (the kernel then adds nothing)."""
    return not np.any(model.body_gravcomp)


def _uses_records(name: str, key: Any) -> bool:
    return key not in _proved[name] or key in _refused[name]


def _qfrc_actuator(nv: int, deterministic: bool = False) -> Any:
    if deterministic and not _uses_records("qfrc_actuator", nv):
        return _originals["qfrc_actuator"](0, False)
    return _originals["qfrc_actuator"](nv, deterministic)


def _qderiv_actuation(nM: int, deterministic: bool = False) -> Any:  # noqa: N803 - mujoco_warp's name
    if deterministic and not _uses_records("qderiv_actuation", nM):
        return _originals["qderiv_actuation"](0, False)
    return _originals["qderiv_actuation"](nM, deterministic)


def _gravity_force(deterministic: bool = False) -> Any:
    if deterministic and not _uses_records("gravity_force", None):
        return _originals["gravity_force"](False)
    return _originals["gravity_force"](deterministic)


def _put_factories() -> None:
    from mujoco_warp._src import derivative, forward, passive

    sites = (("qfrc_actuator", forward, "_qfrc_actuator", _qfrc_actuator),
             ("qderiv_actuation", derivative, "_qderiv_actuator_passive_actuation_sparse", _qderiv_actuation),
             ("gravity_force", passive, "_gravity_force", _gravity_force))
    for name, module, attr, factory in sites:
        if getattr(module, attr) is not factory:
            _originals[name] = getattr(module, attr)
            setattr(module, attr, factory)


@dataclass(frozen=True)
class ExactAdds:
    """A model's launch keys (launch name, factory argument), as install recorded them."""

    keys: tuple[tuple[str, Any], ...]

    def names(self) -> tuple[str, ...]:
        """The launches of this model built without records now: read when asked, since a model built
        later in the process that refuses a key takes the records back for every model's next build."""
        return tuple(name for name, key in self.keys if not _uses_records(name, key))


def install(model: mujoco.MjModel) -> ExactAdds:
    """Record what `model` (the MuJoCo model a deterministic backend is built from) proves, and put
    the factories in place; its launch keys, whose names() are the launches built without records."""
    _put_factories()
    proofs = {"qfrc_actuator": (model.nv, one_add_per_dof(model)),
              "qderiv_actuation": (model.nM, one_add_per_dof(model)),
              "gravity_force": (None, no_gravcomp(model))}
    for name, (key, proved) in proofs.items():
        (_proved if proved else _refused)[name].add(key)
    return ExactAdds(tuple((name, key) for name, (key, _) in proofs.items()))
