"""The left/right mirror derived from a model (tasks/core/symmetry.py)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from reference_helpers import QUAT, state_mirror  # tests/ is on the path (pytest's rootdir)

from unilab.tasks.core.symmetry import joint_mirror, partner_name


def test_partner_names_swap_whole_side_words_only():
    assert partner_name("left_knee_joint") == "right_knee_joint"
    assert partner_name("right_wrist_yaw_joint") == "left_wrist_yaw_joint"
    assert partner_name("L_hip") == "R_hip"
    assert partner_name("waist_yaw_joint") == "waist_yaw_joint"
    assert partner_name("floor_roll") == "floor_roll"  # letters inside words are not sides
    # the Booster T1's names: capitalised side words, first or last
    assert partner_name("Left_Shoulder_Roll") == "Right_Shoulder_Roll"
    assert partner_name("Hip_Yaw_Right") == "Hip_Yaw_Left" and partner_name("L_rail_3") == "R_rail_3"
    assert partner_name("AAHead_yaw") == "AAHead_yaw" and partner_name("Trunk") == "Trunk"


_ARMS = """
<mujoco>
  <worldbody>
    <body name="torso" pos="0 0 2">
      <freejoint/>
      <geom type="box" size="0.1 0.2 0.3" mass="5"/>
      <body name="waist" pos="0 0 0.3">
        <joint name="waist_yaw" axis="0 0 1"/>
        <geom type="sphere" size="0.05" mass="1"/>
      </body>
      <body name="left_arm" pos="0 0.25 0.2">
        <joint name="left_shoulder_pitch" axis="0 1 0"/>
        <joint name="left_shoulder_roll" axis="{left_roll}"/>
        <geom type="capsule" fromto="0 0 0 0.1 0.05 -0.3" size="0.03" mass="1"/>
      </body>
      <body name="right_arm" pos="0 -0.25 0.2">
        <joint name="right_shoulder_pitch" axis="0 1 0"/>
        <joint name="right_shoulder_roll" axis="1 0 0"/>
        <geom type="capsule" fromto="0 0 0 0.1 -0.05 -0.3" size="0.03" mass="1"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position joint="right_shoulder_roll" kp="20"/>
    <position joint="left_shoulder_pitch" kp="20"/>
    <position joint="waist_yaw" kp="20"/>
    <position joint="left_shoulder_roll" kp="20"/>
    <position joint="right_shoulder_pitch" kp="20"/>
  </actuator>
</mujoco>
"""


def _arms(left_roll: str = "1 0 0") -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(_ARMS.format(left_roll=left_roll))


def _check_mirror(model: mujoco.MjModel, steps: int, seed: int = 0) -> tuple[float, float]:
    """Largest |mirror(step(x)) - step(mirror(x))| of qpos and qvel after ``steps`` steps in the air."""
    sm = state_mirror(model)
    rng = np.random.default_rng(seed)
    qpos = model.qpos0.copy()
    qpos[2] += 3.0  # in the air: contacts are not part of this check
    qpos[3:7] = rng.normal(size=4)
    qpos[3:7] /= np.linalg.norm(qpos[3:7])
    qpos[7:] += rng.normal(0.0, 0.2, model.nq - 7)
    qvel = rng.normal(0.0, 0.5, model.nv)
    a, b = mujoco.MjData(model), mujoco.MjData(model)
    a.qpos[:], a.qvel[:] = qpos, qvel
    b.qpos[:], b.qvel[:] = sm.qpos(qpos), sm.qvel(qvel)
    for _ in range(steps):
        ctrl = rng.normal(0.0, 0.3, model.nu)
        a.ctrl[:], b.ctrl[:] = ctrl, sm.ctrl(ctrl)
        mujoco.mj_step(model, a)
        mujoco.mj_step(model, b)
    return float(np.abs(sm.qpos(a.qpos) - b.qpos).max()), float(np.abs(sm.qvel(a.qvel) - b.qvel).max())


def test_mirrored_state_steps_to_the_mirrored_next_state():
    model = _arms()
    assert max(_check_mirror(model, 50)) < 1e-9
    sm = state_mirror(model)
    names = sm.joints.names
    sign = dict(zip(names, sm.joints.sign, strict=True))
    assert sign["left_shoulder_pitch"] == 1 and sign["left_shoulder_roll"] == -1 and sign["waist_yaw"] == -1
    # the actuators are listed in another order than the joints: their map follows the actuators
    acts = [model.joint(int(model.actuator_trnid[a, 0])).name for a in range(model.nu)]
    assert [acts[p] for p in sm.actuators.perm] == [partner_name(n) for n in acts]


def test_mirror_twice_is_the_identity():
    sm = state_mirror(_arms())
    rng = np.random.default_rng(3)
    qpos, qvel, ctrl = rng.normal(size=(4, 12)), rng.normal(size=(4, 11)), rng.normal(size=(4, 5))
    np.testing.assert_array_equal(sm.qpos(sm.qpos(qpos)), qpos)
    np.testing.assert_array_equal(sm.qvel(sm.qvel(qvel)), qvel)
    np.testing.assert_array_equal(sm.ctrl(sm.ctrl(ctrl)), ctrl)


def test_axes_that_are_not_mirror_images_are_refused_by_name():
    with pytest.raises(ValueError, match="left_shoulder_roll.*right_shoulder_roll.*not mirror images"):
        state_mirror(_arms(left_roll="0 0 1"))
    model = _arms()
    with pytest.raises(ValueError, match="'left_shoulder_pitch' has no partner 'right_shoulder_pitch'"):
        joint_mirror(model, [model.joint("left_shoulder_pitch").id])


@pytest.mark.g1
def test_g1_mirror_maps_each_joint_range_onto_its_partner_and_steps_mirrored():
    from unilab.assets import g1

    model = g1.load_model()
    sm = state_mirror(model)
    ranges = model.jnt_range[1:]
    np.testing.assert_allclose(np.sort(sm.joints(ranges.T).T, axis=1), ranges, atol=1e-6)
    # the MJCF's two sides agree to its printed digits; in the air one control step (4 physics steps) stays mirrored
    dq, dv = _check_mirror(model, 4)
    assert dq < 1e-6 and dv < 1e-3


def _mirrored_clip(src, dst, model) -> None:
    """Write the mirror image of clip ``src`` (the fields the motion library reads) to ``dst``."""
    from unilab.tasks.core.symmetry import AXIAL, REFLECT

    d = np.load(src)
    names = [str(n) for n in d["joint_names"]]
    joints = joint_mirror(model, [model.joint(n).id for n in names])
    jp, jv = d["joint_pos"].copy(), d["joint_vel"].copy()
    jp[:, 0:3] *= REFLECT
    jp[:, 3:7] *= QUAT
    jp[:, 7:] = joints(jp[:, 7:])
    jv[:, 0:3] *= REFLECT
    jv[:, 3:6] *= AXIAL
    jv[:, 6:] = joints(jv[:, 6:])
    np.savez(dst, fps=d["fps"], joint_pos=jp, joint_vel=jv, joint_names=d["joint_names"])


@pytest.mark.g1
def test_g1_observations_of_the_mirrored_robot_on_the_mirrored_clip_are_the_mirrored_observations(tmp_path):
    """The env's EnvSpec.mirror against physics: the robot on a clip and, in a second env, the mirrored robot on
    the mirrored clip give mirrored observations and equal rewards, after a reset and after a step (the state
    written as in tests/tiny_robot.teleport, perturbed by a mirrored offset)."""
    from tiny_robot import ZERO_NOISE

    from unilab.assets import g1
    from unilab.tasks.g1_motion_tracking.config import MotionTrackingConfig, ResetConfig
    from unilab.tasks.g1_motion_tracking.env import MotionTrackingEnv

    model = g1.load_model()
    clip = g1.motion_paths()[0]
    _mirrored_clip(clip, tmp_path / "mirrored.npz", model)
    envs = []
    for path in (clip, tmp_path / "mirrored.npz"):
        cfg = MotionTrackingConfig(motion_files=[str(path)], reset=ResetConfig(noise=ZERO_NOISE, sampling="uniform"))
        cfg.randomization.enabled = False
        envs.append(MotionTrackingEnv(cfg, 4, seed=7))
    a, b = envs
    mirror = {k: (np.asarray(p), np.asarray(s)) for k, (p, s) in a.spec.mirror.items()}

    def mirrored(key, x):
        perm, sign = mirror[key]
        return x[..., perm] * sign

    obs_a, obs_b = a.reset(), b.reset()
    np.testing.assert_array_equal(a.frame, b.frame)
    np.testing.assert_allclose(mirrored("critic_obs", obs_a["critic_obs"]), obs_b["critic_obs"], atol=2e-5)
    # the policy observation (with its noise) is the critic's first entries, and so is its mirror
    for i in range(2):
        np.testing.assert_array_equal(mirror["obs"][i], mirror["critic_obs"][i][:a.obs_dim])

    sm = state_mirror(a.pool.model)
    rng = np.random.default_rng(0)
    dq = np.zeros((4, model.nq))
    dv = np.zeros((4, model.nv))
    dq[:, 7:] = rng.normal(0.0, 0.1, (4, model.nq - 7))
    dq[:, 0:3] = rng.normal(0.0, 0.05, (4, 3))
    dv[:] = rng.normal(0.0, 0.3, (4, model.nv))
    for env, (oq, ov) in ((a, (dq, dv)), (b, (sm.qpos(dq), sm.qvel(dv)))):
        def step(ctrl, substeps=1, env=env, oq=oq, ov=ov):
            ref = env.motion.lookup(env.clip, env.frame + 1)
            env.pool.reset(np.arange(env.num_envs), ref.qpos + oq, ref.qvel + ov)
            return env.pool.bad_envs

        env.pool.step = step
    action = rng.uniform(-1, 1, (4, 29)).astype(np.float32)
    obs_a, rew_a, term_a, _, _ = a.step(action)
    obs_b, rew_b, term_b, _, _ = b.step(mirrored("action", action).astype(np.float32))
    np.testing.assert_array_equal(term_a, term_b)
    np.testing.assert_allclose(rew_a, rew_b, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(mirrored("critic_obs", obs_a["critic_obs"]), obs_b["critic_obs"], atol=2e-5)
    assert np.abs(obs_a["critic_obs"] - obs_b["critic_obs"]).max() > 0.1  # the two robots differ
