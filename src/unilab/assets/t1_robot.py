"""The Booster T1 29-DoF, from holosoma 0.0.3's robot config (``config_values/robot.py``, ``t1_29dof_waist_wrist``):
joint-space maps (the rule of ``unilab.tasks.core.joints``) and the bodies the tasks name. Plain data (no MuJoCo);
``unilab.tasks.core.robot_config.ROBOTS["t1"]`` is the robot preset built from it. Joint order: the MJCF's, which is
holosoma's dof_names.
"""

from __future__ import annotations

_ARMS = ".*_(Shoulder|Elbow|Wrist)_(Pitch|Roll|Yaw)|.*_Hand_Roll"

DEFAULT_JOINT_POS = {
    ".*_Shoulder_Pitch": 0.2, "Left_Shoulder_Roll": -1.35, "Right_Shoulder_Roll": 1.35,
    "Left_Elbow_Yaw": -0.5, "Right_Elbow_Yaw": 0.5,
    ".*_Hip_Pitch": -0.2, ".*_Knee_Pitch": 0.4, ".*_Ankle_Pitch": -0.25,
}
"""rad; joints matching no key are at 0 (holosoma's init_state default_joint_angles)."""

KP = {"AAHead_yaw|Head_pitch": 5.0, _ARMS: 20.0, "Waist|.*_Hip_(Pitch|Roll|Yaw)|.*_Knee_Pitch": 200.0,
      ".*_Ankle_(Pitch|Roll)": 50.0}
"""N m / rad (holosoma's control.stiffness, whose keys match a joint name containing them)."""

KD = {"AAHead_yaw|Head_pitch": 0.5, _ARMS: 0.5, "Waist|.*_Hip_(Pitch|Roll|Yaw)|.*_Knee_Pitch": 5.0,
      ".*_Ankle_(Pitch|Roll)": 3.0}
"""N m s / rad (control.damping)."""

EFFORT_LIMIT = {"AAHead_yaw|Head_pitch": 7.0, _ARMS: 18.0, "Waist|.*_Hip_(Roll|Yaw)": 30.0, ".*_Hip_Pitch": 45.0,
                ".*_Knee_Pitch": 60.0, ".*_Ankle_(Pitch|Roll)": 12.0}
"""N m (dof_effort_limit_list, the URDF's effort limits holosoma's IsaacGym clamps torques to; the MJCF's motors
allow more at the hip roll 45, knee 65, ankle pitch 24 and ankle roll 15)."""

BASE_BODY = "Trunk"
"""The free joint's body (the root of holosoma's URDF)."""
TORSO_BODY = "Trunk"
"""torso_name: the body the locomotion recipe adds mass to and shifts the centre of mass of."""
BASE_HEIGHT = 0.68
"""init_state pos z (m)."""
FEET = ("left_foot_link", "right_foot_link")
"""The bodies whose names contain foot_body_name "foot_link"."""
FOOT_POINTS = ("left_foot_contact_point", "right_foot_contact_point")
"""The bodies whose names contain foot_height_name "foot_contact_point"."""
TERMINATION_BODIES = ".*(Waist|Shoulder|Hip|Trunk|Head).*"
"""terminate_after_contacts_on ["Waist", "Shoulder", "Hip", "Trunk", "Head"] as a regex: the bodies whose names
contain one of them (Trunk, Waist and the six hip links; no body name contains Shoulder or Head)."""
LINK_MASS_BODIES = ("Trunk|Hip_(Pitch|Roll|Yaw)_(Left|Right)|Shank_(Left|Right)|Ankle_Cross_(Left|Right)|"
                    "(left|right)_foot_link")
"""randomize_link_body_names: the links whose masses the locomotion recipe scales."""
