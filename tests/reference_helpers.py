"""Reference helpers only the tests use: a quaternion error angle, the mirror of a free-floating robot's state,
a stream's draws in bulk, a thread's CPU set."""

from __future__ import annotations

import os
from dataclasses import dataclass

import mujoco
import numpy as np
from numba import njit, prange

from unilab.tasks.core.symmetry import AXIAL, REFLECT, JointMirror, joint_mirror
from unilab.tasks.env_streams import next_symmetric

QUAT = np.array([1.0, -1.0, 1.0, -1.0])  # how a (w, x, y, z) rotation quaternion maps under the mirror


def quat_error_angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rotation angle (rad, in [0, pi]) between unit quaternions ``a`` and ``b``."""
    d = np.abs(np.sum(a * b, axis=-1))
    return 2.0 * np.arccos(np.clip(d, 0.0, 1.0))


@dataclass(frozen=True)
class StateMirror:
    """The mirror of a free-floating robot's ``(qpos, qvel)`` and of its actuators' controls."""

    joints: JointMirror  # the hinge joints after the free joint, in qpos order
    actuators: JointMirror  # the actuators' joints, in actuator order (position targets mirror like joint positions)

    def qpos(self, qpos: np.ndarray) -> np.ndarray:
        out = np.empty_like(qpos)
        out[..., 0:3] = qpos[..., 0:3] * REFLECT
        out[..., 3:7] = qpos[..., 3:7] * QUAT
        out[..., 7:] = self.joints(qpos[..., 7:])
        return out

    def qvel(self, qvel: np.ndarray) -> np.ndarray:
        out = np.empty_like(qvel)
        out[..., 0:3] = qvel[..., 0:3] * REFLECT  # MuJoCo's free joint: linear velocity in the world frame
        out[..., 3:6] = qvel[..., 3:6] * AXIAL  # angular velocity in the (mirrored) body frame
        out[..., 6:] = self.joints(qvel[..., 6:])
        return out

    def ctrl(self, ctrl: np.ndarray) -> np.ndarray:
        return self.actuators(ctrl)


def state_mirror(model: mujoco.MjModel) -> StateMirror:
    """:class:`StateMirror` of a model whose first joint is a free joint followed by hinge joints only, each
    actuator driving one of them; ValueError for another layout, or what :func:`joint_mirror` refuses."""
    if model.njnt < 2 or int(model.jnt_type[0]) != int(mujoco.mjtJoint.mjJNT_FREE) or model.nq != 7 + model.njnt - 1:
        raise ValueError("mirror: the model needs a free joint first and hinge joints after it")
    actuated = [int(model.actuator_trnid[a, 0]) for a in range(model.nu)]
    if any(int(model.actuator_trntype[a]) != int(mujoco.mjtTrn.mjTRN_JOINT) for a in range(model.nu)):
        raise ValueError("mirror: every actuator must drive a joint")
    return StateMirror(joint_mirror(model, range(1, model.njnt)), joint_mirror(model, actuated))


@njit(cache=True, parallel=True, fastmath=False)
def fill_symmetric(states, rows, out):
    """``out[i, m]`` = the next ``out.shape[1]`` draws of env ``rows[i]``'s stream, in ``m`` order."""
    for i in prange(rows.shape[0]):
        e = rows[i]
        for m in range(out.shape[1]):
            out[i, m] = next_symmetric(states, e)


def thread_affinity(tid: int) -> set[int]:
    """The CPU set thread ``tid`` may run on (Linux)."""
    return set(os.sched_getaffinity(tid))

