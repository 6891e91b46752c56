"""G1 motion-tracking terms as batched tensor functions (docs/assets-and-tasks.md).

One batched call per term, no per-env loop. Reference bodies are compared
after re-anchoring: the reference is moved so that its anchor sits on the
robot's anchor in x/y and yaw (height and tilt stay the reference's), so body
terms measure pose tracking, not drift, which the anchor terms already measure.
"""

from __future__ import annotations

import torch

from soaklab.tasks.g1_tracking.quat import (
    matrix_6d,
    projected_gravity_z,
    quat_apply,
    quat_apply_inverse,
    quat_conjugate,
    quat_error_magnitude,
    quat_mul,
    yaw_quat,
)


def exp_kernel(error_sq: torch.Tensor, std: float) -> torch.Tensor:
    return torch.exp(-error_sq / (std * std))


def reanchor(ref_pos: torch.Tensor, ref_quat: torch.Tensor, ref_anchor_pos: torch.Tensor,
             ref_anchor_quat: torch.Tensor, robot_anchor_pos: torch.Tensor,
             robot_anchor_quat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference bodies [N,K,*] moved so the reference anchor matches the robot anchor in x/y and yaw."""
    delta_yaw = yaw_quat(quat_mul(robot_anchor_quat, quat_conjugate(ref_anchor_quat)))  # [N,4]
    target = ref_anchor_pos.clone()
    target[:, :2] = robot_anchor_pos[:, :2]
    yaw = delta_yaw[:, None, :].expand_as(ref_quat)
    pos = target[:, None, :] + quat_apply(yaw, ref_pos - ref_anchor_pos[:, None, :])
    return pos, quat_mul(yaw, ref_quat)


# -- rewards (each returns [N], unweighted) ------------------------------------------------------

def anchor_pos_reward(ref_pos: torch.Tensor, robot_pos: torch.Tensor, std: float) -> torch.Tensor:
    return exp_kernel(((ref_pos - robot_pos) ** 2).sum(-1), std)


def anchor_ori_reward(ref_quat: torch.Tensor, robot_quat: torch.Tensor, std: float) -> torch.Tensor:
    return exp_kernel(quat_error_magnitude(ref_quat, robot_quat) ** 2, std)


def body_pos_reward(ref_pos: torch.Tensor, robot_pos: torch.Tensor, std: float) -> torch.Tensor:
    return exp_kernel(((ref_pos - robot_pos) ** 2).sum(-1).mean(-1), std)


def body_ori_reward(ref_quat: torch.Tensor, robot_quat: torch.Tensor, std: float) -> torch.Tensor:
    return exp_kernel((quat_error_magnitude(ref_quat, robot_quat) ** 2).mean(-1), std)


def body_vel_reward(ref_vel: torch.Tensor, robot_vel: torch.Tensor, std: float) -> torch.Tensor:
    return exp_kernel(((ref_vel - robot_vel) ** 2).sum(-1).mean(-1), std)


def action_rate_penalty(action: torch.Tensor, last_action: torch.Tensor) -> torch.Tensor:
    return ((action - last_action) ** 2).sum(-1)


def joint_limit_penalty(joint_pos: torch.Tensor, soft_lo: torch.Tensor, soft_hi: torch.Tensor) -> torch.Tensor:
    return ((soft_lo - joint_pos).clamp(min=0) + (joint_pos - soft_hi).clamp(min=0)).sum(-1)


# -- terminations (each returns [N] bool) --------------------------------------------------------

def anchor_height_failed(ref_z: torch.Tensor, robot_z: torch.Tensor, threshold: float) -> torch.Tensor:
    return (ref_z - robot_z).abs() > threshold


def anchor_ori_failed(ref_quat: torch.Tensor, robot_quat: torch.Tensor, threshold: float) -> torch.Tensor:
    """Tilt mismatch: gravity's z in the two anchor frames differs by more than `threshold`."""
    return (projected_gravity_z(ref_quat) - projected_gravity_z(robot_quat)).abs() > threshold


def end_effector_height_failed(ref_z: torch.Tensor, robot_z: torch.Tensor, threshold: float) -> torch.Tensor:
    return ((ref_z - robot_z).abs() > threshold).any(-1)


# -- observations --------------------------------------------------------------------------------

def anchor_error_in_anchor_frame(ref_pos: torch.Tensor, ref_quat: torch.Tensor, robot_pos: torch.Tensor,
                                 robot_quat: torch.Tensor) -> torch.Tensor:
    """[N, 9]: reference anchor position (3) and orientation (6D) in the robot anchor frame."""
    pos = quat_apply_inverse(robot_quat, ref_pos - robot_pos)
    rot = matrix_6d(quat_mul(quat_conjugate(robot_quat), ref_quat))
    return torch.cat([pos, rot], dim=-1)


def bodies_in_anchor_frame(body_pos: torch.Tensor, body_quat: torch.Tensor, anchor_pos: torch.Tensor,
                           anchor_quat: torch.Tensor) -> torch.Tensor:
    """[N, K*9]: body positions (K x 3) then 6D orientations (K x 6) relative to the anchor."""
    q = anchor_quat[:, None, :].expand_as(body_quat)
    pos = quat_apply_inverse(q, body_pos - anchor_pos[:, None, :])
    rot = matrix_6d(quat_mul(quat_conjugate(q), body_quat))
    return torch.cat([pos.flatten(1), rot.flatten(1)], dim=-1)
