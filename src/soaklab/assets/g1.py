"""Unitree G1 29-DoF constants: joint groups, motor table and default pose (docs/assets-and-tasks.md).

Gains follow the motor's reflected armature: kp = armature * w^2 and
kd = 2 * zeta * armature * w with w = 2*pi*10 Hz and zeta = 2, the convention
G1 model users (mjlab) apply; the effort limits are Unitree's motor specs.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

NATURAL_FREQ_HZ = 10.0
DAMPING_RATIO = 2.0
ACTION_SCALE_FACTOR = 0.25  # action scale = factor x effort / kp
ROOT_HEIGHT = 0.76
PHYSICS_DT = 0.005


@dataclass(frozen=True)
class MotorClass:
    name: str
    armature: float  # kg m^2
    effort_limit: float  # N m
    joint_pattern: str  # regex on joint names

    @property
    def kp(self) -> float:
        return self.armature * (2 * math.pi * NATURAL_FREQ_HZ) ** 2

    @property
    def kd(self) -> float:
        return 2 * DAMPING_RATIO * self.armature * 2 * math.pi * NATURAL_FREQ_HZ

    @property
    def action_scale(self) -> float:
        return ACTION_SCALE_FACTOR * self.effort_limit / self.kp


MOTOR_CLASSES: tuple[MotorClass, ...] = (
    MotorClass("5020", 0.003610, 25.0, r"(shoulder_(pitch|roll|yaw)|elbow|wrist_roll)_joint$"),
    MotorClass("7520_14", 0.010178, 88.0, r"(hip_pitch|hip_yaw|waist_yaw)_joint$"),
    MotorClass("7520_22", 0.025102, 139.0, r"(hip_roll|knee)_joint$"),
    MotorClass("4010", 0.004250, 5.0, r"wrist_(pitch|yaw)_joint$"),
    MotorClass("2x5020", 0.007219, 50.0, r"(waist_(pitch|roll)|ankle_(pitch|roll))_joint$"),
)

DEFAULT_JOINT_POS: dict[str, float] = {
    r".*_hip_pitch_joint$": -0.312,
    r".*_knee_joint$": 0.669,
    r".*_ankle_pitch_joint$": -0.363,
    r".*_elbow_joint$": 0.6,
    r".*_shoulder_pitch_joint$": 0.2,
    r"left_shoulder_roll_joint$": 0.2,
    r"right_shoulder_roll_joint$": -0.2,
}

FOOT_GEOM_PATTERN = re.compile(r"^(left|right)_foot\d+_collision$")
FOOT_CONDIM = 3
FOOT_FRICTION = 0.6
OTHER_CONDIM = 1


def motor_class(joint: str) -> MotorClass:
    matches = [m for m in MOTOR_CLASSES if re.search(m.joint_pattern, joint)]
    if len(matches) != 1:
        raise ValueError(f"joint {joint!r} matches {len(matches)} motor classes; expected exactly one")
    return matches[0]


def default_joint_pos(joint: str) -> float:
    for pattern, value in DEFAULT_JOINT_POS.items():
        if re.search(pattern, joint):
            return value
    return 0.0
