"""The Unitree G1 29-DoF's joint-space defaults, from holosoma 0.0.3's robot config (``config_values/robot.py``,
``g1_29dof``), as ``{joint name or regex: value}`` maps (the rule of ``unilab.tasks.core.joints``).

Plain data (no MuJoCo), so task configs import it; every G1 task's config defaults to these.
"""

from __future__ import annotations

_ARMS = ".*_(shoulder_(pitch|roll|yaw)|elbow|wrist_roll)_joint"

DEFAULT_JOINT_POS = {
    ".*_hip_pitch_joint": -0.312, ".*_knee_joint": 0.669, ".*_ankle_pitch_joint": -0.363,
    ".*_elbow_joint": 0.6, "left_shoulder_roll_joint": 0.2, ".*_shoulder_pitch_joint": 0.2,
    "right_shoulder_roll_joint": -0.2,
}
"""rad; joints matching no key are at 0 (holosoma's init_state default_joint_angles)."""

# stiffness = armature x (2 pi 10 Hz)^2, damping = 2 x 2.0 x armature x (2 pi 10 Hz)
KP = {
    ".*_hip_pitch_joint": 40.18, ".*_hip_roll_joint": 99.10, ".*_hip_yaw_joint": 40.18,
    ".*_knee_joint": 99.10, ".*_ankle_(pitch|roll)_joint": 28.50, "waist_yaw_joint": 40.18,
    "waist_(roll|pitch)_joint": 28.50, _ARMS: 14.25, ".*_wrist_(pitch|yaw)_joint": 16.78,
}
"""N m / rad."""

KD = {
    ".*_hip_pitch_joint": 2.558, ".*_hip_roll_joint": 6.309, ".*_hip_yaw_joint": 2.558,
    ".*_knee_joint": 6.309, ".*_ankle_(pitch|roll)_joint": 1.814, "waist_yaw_joint": 2.558,
    "waist_(roll|pitch)_joint": 1.814, _ARMS: 0.907, ".*_wrist_(pitch|yaw)_joint": 1.068,
}
"""N m s / rad."""
