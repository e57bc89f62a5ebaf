"""The motion-tracking task against holosoma's G1 WBT FastSAC recipe: each value computed from holosoma's formula
or config numbers (holosoma 0.0.3: managers/*/terms, config_values/robot.py, config_values/wbt/g1) and compared."""

from __future__ import annotations

import copy

import mujoco
import numpy as np
import pytest
from tiny_robot import ROBOT_XML, teleport

from unilab.tasks.core.randomization import TERMS
from unilab.tasks.g1_motion_tracking.config import (
    ContactTerm,
    MotionTrackingConfig,
    RandomizationConfig,
    ResetNoiseConfig,
    RewardsConfig,
    TerminationsConfig,
)
from unilab.tasks.g1_motion_tracking.env import MotionTrackingEnv

# holosoma config_values/robot.py g1_29dof: dof_names and dof_effort_limit_list
G1_DOF_NAMES = [
    "left_hip_pitch_joint", "left_hip_roll_joint", "left_hip_yaw_joint", "left_knee_joint", "left_ankle_pitch_joint",
    "left_ankle_roll_joint", "right_hip_pitch_joint", "right_hip_roll_joint", "right_hip_yaw_joint",
    "right_knee_joint", "right_ankle_pitch_joint", "right_ankle_roll_joint", "waist_yaw_joint", "waist_roll_joint",
    "waist_pitch_joint", "left_shoulder_pitch_joint", "left_shoulder_roll_joint", "left_shoulder_yaw_joint",
    "left_elbow_joint", "left_wrist_roll_joint", "left_wrist_pitch_joint", "left_wrist_yaw_joint",
    "right_shoulder_pitch_joint", "right_shoulder_roll_joint", "right_shoulder_yaw_joint", "right_elbow_joint",
    "right_wrist_roll_joint", "right_wrist_pitch_joint", "right_wrist_yaw_joint",
]
G1_EFFORT = [88.0, 139.0, 88.0, 139.0, 50.0, 50.0, 88.0, 139.0, 88.0, 139.0, 50.0, 50.0, 88.0, 50.0, 50.0,
             25.0, 25.0, 25.0, 25.0, 25.0, 5.0, 5.0, 25.0, 25.0, 25.0, 25.0, 25.0, 5.0, 5.0]


def _model_cfg(cfg, tmp_path, xml: str):
    cfg = copy.deepcopy(cfg)
    path = tmp_path / "robot_variant.xml"
    path.write_text(xml)
    cfg.robot.model_xml = str(path)
    return cfg


def _bounded(cfg, action_scale=0.25):
    cfg = copy.deepcopy(cfg)
    cfg.action_scale = action_scale
    cfg.action_bound_from_joint_range = True
    return cfg


def _start(env):
    """Every env at frame 0 of clip 0 (no clip end within the tests' few steps)."""
    zeros = np.zeros(env.num_envs, dtype=np.int64)
    return env.start_at(zeros, zeros)


def _holosoma_bound(env, action_scale):
    """FastSAC's per-joint action bound: max(|lo - default|, |hi - default|) / action_scale."""
    lo, hi = env.joint_lo[env.act_joint], env.joint_hi[env.act_joint]
    d = env.default_joint_pos[env.act_joint]
    return np.maximum(np.abs(lo - d), np.abs(hi - d)) / action_scale


def test_action_rate_and_last_action_in_the_recipes_action_units(tiny_cfg):
    """holosoma's penalty_action_rate = sum((prev_action - action)^2) and its `actions` observation = action,
    both of the action its env receives: FastSAC's b_j x the [-1, 1] action."""
    env = MotionTrackingEnv(_bounded(tiny_cfg), 4)
    b = _holosoma_bound(env, 0.25)
    np.testing.assert_allclose(env.action_bound, b)
    assert not np.allclose(b, 1.0)
    _start(env)
    teleport(env)  # no failures: the two steps are one episode
    rng = np.random.default_rng(0)
    a1, a2 = (rng.uniform(-1, 1, (4, 2)).astype(np.float32) for _ in range(2))
    env.step(a1)
    obs, _, _, _, info = env.step(a2)
    holo_a1, holo_a2 = b * a1.astype(np.float64), b * a2.astype(np.float64)
    want = np.sum(np.square(holo_a1 - holo_a2), axis=1)
    np.testing.assert_allclose(info["reward_terms"]["action_rate"], want, rtol=1e-6)
    for part in ("obs", "critic_obs"):
        np.testing.assert_allclose(obs[part][:, env.layout.slices["last_action"]], holo_a2, rtol=1e-6)


def test_observation_shows_the_frame_the_next_reward_scores(tiny_cfg):
    """holosoma computes reward and terminations, then advances the motion clock (MotionCommand.step), then the
    observation: the observation after step k shows reference frame k + 1, which step k + 1's reward scores."""
    env = MotionTrackingEnv(tiny_cfg, 4)
    obs = _start(env)
    teleport(env)
    s = env.layout.slices["ref_joint_pos"]
    zero = np.zeros((4, 2), dtype=np.float32)
    for _ in range(4):
        shown = obs["obs"][:, s].copy()
        scored_before = env.state.ref_index.copy()
        obs, _, term, trunc, info = env.step(zero)
        assert not (term | trunc).any()
        # this step scored the frame after the one scored before: the one the previous observation showed
        assert np.array_equal(env.state.ref_index, scored_before + 1)
        np.testing.assert_allclose(shown, env.motion.joint_pos[env.state.ref_index], atol=1e-6)
        # and the robot, put on that frame, tracks it exactly
        np.testing.assert_allclose(info["reward_terms"]["body_pos"], 1.0, atol=1e-6)
        np.testing.assert_allclose(obs["obs"][:, s], env.motion.joint_pos[env.state.ref_index + 1], atol=1e-6)


def test_g1_effort_limits_are_holosomas():
    """config_values/robot.py g1_29dof dof_effort_limit_list (= the MJCF joints' actuatorfrcrange), not the
    motors' ctrlrange (88 for the 139 N m hip roll)."""
    from unilab.assets import g1
    from unilab.tasks.core.actuation import effort_limits

    m = g1.load_model()
    effort = effort_limits(m)
    joint_of = {m.joint(int(m.actuator_trnid[a, 0])).name: effort[a] for a in range(m.nu)}
    assert sorted(joint_of) == sorted(G1_DOF_NAMES)
    np.testing.assert_array_equal([joint_of[n] for n in G1_DOF_NAMES], G1_EFFORT)
    for a in range(m.nu):
        j = int(m.actuator_trnid[a, 0])
        assert effort[a] == np.abs(m.jnt_actfrcrange[j]).max()


def _robot_pairs_in_contact(model, data, robot):
    """Contacts whose two geoms both belong to the robot's bodies, and those with one on the world body."""
    own = world = 0
    for c in data.contact[: data.ncon]:
        b1, b2 = model.geom_bodyid[c.geom1], model.geom_bodyid[c.geom2]
        own += b1 in robot and b2 in robot
        world += (b1 == 0) != (b2 == 0)
    return own, world


@pytest.mark.g1
def test_g1_self_collisions_as_in_holosomas_wbt_experiment():
    """holosoma's g1_29dof_wbt_fast_sac experiment sets the robot asset's enable_self_collisions=True (the
    asset's default is False); its MuJoCo scene then gives robot geoms of contype 1 / conaffinity 1 the
    conaffinity 3 ("self + environment"), else 2 ("environment only"), which task.self_collisions=false applies."""
    from unilab.assets import g1
    from unilab.tasks.core.collisions import ROBOT_CONAFFINITY, disable_self_collisions, robot_bodies
    from unilab.tasks.g1_motion_tracking.motion import MotionLibrary

    def holosoma_robot_conaffinity(enable_self_collisions):  # scene_manager._configure_robot_collisions
        return 3 if enable_self_collisions else 2

    wbt_fast_sac_enable_self_collisions = True  # config_values/wbt/g1/experiment.py, g1_29dof_wbt_fast_sac
    assert MotionTrackingConfig().self_collisions is wbt_fast_sac_enable_self_collisions
    assert ROBOT_CONAFFINITY == holosoma_robot_conaffinity(enable_self_collisions=False)
    on, off = g1.load_model(), g1.load_model()
    changed = disable_self_collisions(off, "torso_link")
    robot = set(robot_bodies(off, "torso_link").tolist())
    assert changed == sum(1 for g in range(on.ngeom) if on.geom_bodyid[g] in robot
                          and (on.geom_contype[g], on.geom_conaffinity[g]) == (1, 1))
    cfg = MotionTrackingConfig()
    lib = MotionLibrary(on, g1.motion_paths(), 0.02, cfg.tracked_bodies, cfg.anchor_body)
    frames_with_self_contact = 0
    for k in range(0, lib.qpos.shape[0], 10):
        counts = []
        for model in (on, off):
            data = mujoco.MjData(model)
            data.qpos[:] = lib.qpos[k]
            data.qpos[2] -= 0.02  # a little into the floor: the world contacts must stay
            mujoco.mj_forward(model, data)
            counts.append(_robot_pairs_in_contact(model, data, robot))
        (own_on, world_on), (own_off, world_off) = counts
        frames_with_self_contact += own_on > 0
        assert own_off == 0 and world_off == world_on
    assert frames_with_self_contact > 0  # the G1 MJCF's geoms do overlap on the clip: the setting matters


@pytest.mark.parametrize("self_collisions", [False, True])
def test_the_env_model_has_self_collisions_as_configured(tiny_cfg, self_collisions):
    tiny_cfg.self_collisions = self_collisions
    env = MotionTrackingEnv(tiny_cfg, 1)
    m = env.model
    robot_geoms = [g for g in range(m.ngeom) if m.geom_bodyid[g] != 0 and m.geom_contype[g] == 1]
    assert robot_geoms and {int(m.geom_conaffinity[g]) for g in robot_geoms} == {1 if self_collisions else 2}
    assert all(m.geom_conaffinity[g] == 1 for g in range(m.ngeom) if m.geom_bodyid[g] == 0)  # the floor


_PAIR_XML = ROBOT_XML.replace(
    '<geom type="box" size="0.1 0.1 0.1" mass="1"/>',
    '<geom name="base_box" type="box" size="0.1 0.1 0.1" mass="1" contype="0" conaffinity="0"/>',
).replace("</worldbody>", """</worldbody>
  <contact>
    <pair geom1="floor" geom2="base_box" friction="0.8 0.8 0.005 0.0001 0.0001"/>
  </contact>""")


def _only_friction(cfg):
    cfg = copy.deepcopy(cfg)
    cfg.randomization = RandomizationConfig()
    for t in TERMS:
        getattr(cfg.randomization, t.name).enabled = t.name == "friction"
    return cfg


def _sink_base(env, depth=0.02):
    """Put every env's base box ``depth`` into the floor (its contact with the floor is the <pair>'s)."""
    qpos = env.pool.qpos.copy()
    qpos[:, 2] = 0.1 - depth
    qpos[:, 3:7] = (1.0, 0.0, 0.0, 0.0)
    env.pool.reset(np.arange(env.num_envs), qpos, np.zeros_like(env.pool.qvel))


def test_friction_randomization_reaches_explicit_contact_pairs(tiny_cfg, tmp_path):
    """The G1's feet touch the floor only through <pair>s, whose friction (0.8) overrides the geoms': the
    sampled coefficient must be the friction of each such contact."""
    cfg = _only_friction(_model_cfg(tiny_cfg, tmp_path, _PAIR_XML))
    env = MotionTrackingEnv(cfg, 6, pool_kwargs={"persistent": True, "contacts": True})
    sampled = env.randomizer.friction
    assert np.unique(sampled).size == 6 and not np.isclose(sampled, 0.8).any()
    env.reset()
    _sink_base(env)
    env.pool.step(None, cfg.decimation)
    floor = mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_GEOM, "floor")
    box = mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_GEOM, "base_box")
    for e in range(env.num_envs):
        data = env.pool._batch.get_data(e)
        pair = [i for i in range(data.ncon) if {data.contact.geom1[i], data.contact.geom2[i]} == {floor, box}]
        assert pair, f"env {e}: no floor-box contact"
        for i in pair:
            np.testing.assert_array_equal(data.contact.friction[i, :2], sampled[e])


_SENSOR_XML = ROBOT_XML.replace(
    '<geom type="box" size="0.1 0.1 0.1" mass="1"/>',
    '<geom type="box" size="0.1 0.1 0.1" mass="1"/>\n      <site name="imu"/>',
).replace("</actuator>", """</actuator>
  <sensor>
    <accelerometer site="imu"/>
  </sensor>""")


def _holosoma_touching(model, state, ctrl, decimation, bodies, threshold):
    """holosoma's MuJoCo backend: after the policy step's substeps, each body's net contact force (sum over
    its contacts of mj_contactForce, in world axes, Newton's third law); UndesiredContacts takes the bodies
    whose force norm exceeds the threshold (at any step of the history)."""
    data = mujoco.MjData(model)
    mujoco.mj_setState(model, data, state, mujoco.mjtState.mjSTATE_INTEGRATION)
    data.ctrl[:] = ctrl
    for _ in range(decimation):
        mujoco.mj_step(model, data)
    force = np.zeros((model.nbody, 3))
    f6 = np.zeros(6)
    for i in range(data.ncon):
        c = data.contact[i]
        mujoco.mj_contactForce(model, data, i, f6)
        f = c.frame.reshape(3, 3).T @ f6[:3]
        force[model.geom_bodyid[c.geom1]] -= f
        force[model.geom_bodyid[c.geom2]] += f
    return np.linalg.norm(force[bodies], axis=1) > threshold


def test_undesired_contacts_counts_bodies_touching_with_more_than_the_threshold(tiny_cfg, tmp_path):
    """holosoma's UndesiredContacts (weight -0.1, threshold 1 N): the matched bodies whose net contact force
    exceeded the threshold at any of the last 3 policy steps since the reset."""
    cfg = _model_cfg(tiny_cfg, tmp_path, _SENSOR_XML)
    cfg.rewards = RewardsConfig()
    assert (cfg.rewards.undesired_contacts.weight, cfg.rewards.undesired_contacts.threshold) == (-0.1, 1.0)
    # let the sunk robot run
    cfg.terminations = TerminationsConfig(anchor_height=100.0, anchor_orientation=2.0, end_effector_height=100.0)
    env = MotionTrackingEnv(cfg, 3)
    assert env.pool.contacts and env.contact_bodies.tolist() == [1, 2, 3]  # base, upper, tip
    _start(env)
    _sink_base(env, depth=0.03)
    zero = np.zeros((3, 2), dtype=np.float32)
    history = []
    for step in range(10):
        if step == 3:
            env.pool.qvel[1, 2] = 3.0  # env 1 jumps off the floor: its contacts end, and leave the history later
        states = np.array(env.pool._batch.state, copy=True)
        history.append([_holosoma_touching(env.model, states[e], env.ctrl_default[e], cfg.decimation,
                                           env.contact_bodies, 1.0) for e in range(3)])
        _, _, term, trunc, info = env.step(zero)
        assert not (term | trunc).any()
        want = np.any(np.array(history[-3:]), axis=0).sum(axis=1)  # max over the history of 3 steps, counted
        np.testing.assert_array_equal(info["reward_terms"]["undesired_contacts"], want)
    touched = np.array(history).any(axis=2)  # (steps, envs)
    assert touched[:, 0].all() and touched[:3, 1].all() and not touched[3:, 1].any()
    assert info["reward_terms"]["undesired_contacts"][1] == 0  # the history has forgotten env 1's contacts
    w = env.rewards.weights[env.reward_term_names.index("undesired_contacts")]
    assert w == pytest.approx(-0.1 * (env.control_dt if cfg.reward_times_dt else 1.0))


def test_undesired_contacts_off_keeps_the_contact_free_pool(tiny_cfg):
    env = MotionTrackingEnv(tiny_cfg, 2)
    assert tiny_cfg.rewards.undesired_contacts.weight == 0 and not env.pool.contacts
    assert env.contact_bodies.size == 0


def test_undesired_contacts_need_a_force_sensor(tiny_cfg):
    cfg = copy.deepcopy(tiny_cfg)
    cfg.rewards = RewardsConfig(undesired_contacts=ContactTerm(-0.1))
    with pytest.raises(ValueError, match="task.rewards.undesired_contacts"):
        MotionTrackingEnv(cfg, 2)


def test_observations_are_clipped_to_100(tiny_cfg):
    """holosoma's BaseTask._clip_observations: every observation group clipped to +-clip_observations (100)."""
    env = MotionTrackingEnv(_bounded(tiny_cfg, action_scale=0.01), 2)  # bounds of 200+: last_action overflows
    _start(env)
    teleport(env)
    action = np.array([[1.0, -1.0], [0.2, 0.3]], dtype=np.float32)
    obs = env.step(action)[0]
    raw = env.action_bound * action.astype(np.float64)
    assert np.abs(raw).max() > 100
    for part in ("obs", "critic_obs"):
        np.testing.assert_allclose(obs[part][:, env.layout.slices["last_action"]], np.clip(raw, -100, 100),
                                   rtol=1e-6)
        assert np.abs(obs[part]).max() <= 100


def test_reset_joint_noise_is_clipped_to_the_soft_limits(tiny_cfg):
    """holosoma's MotionCommand.reset clips the noisy joint positions to the simulator's soft limits:
    m +- 0.5 r soft_dof_pos_limit (robot config default 0.95) with m, r the hard range's centre and width."""
    cfg = copy.deepcopy(tiny_cfg)
    cfg.reset.noise = ResetNoiseConfig(root_pos=[0, 0, 0], root_rpy=[0, 0, 0], root_lin_vel=[0, 0, 0],
                                       root_ang_vel=[0, 0, 0], joint_pos=5.0)
    env = MotionTrackingEnv(cfg, 64)
    env.reset()
    lo, hi = env.joint_lo, env.joint_hi
    m, r = (lo + hi) / 2, hi - lo
    soft_lo, soft_hi = m - 0.5 * r * 0.95, m + 0.5 * r * 0.95
    q = env.pool.qpos[:, env.qpos_adr]
    assert (q >= soft_lo - 1e-12).all() and (q <= soft_hi + 1e-12).all()
    assert np.isclose(q, soft_lo).any() and np.isclose(q, soft_hi).any()


def test_failure_at_a_time_out_bootstraps_and_still_counts_as_a_failure(tiny_cfg):
    """holosoma's FastSAC bootstraps truncations | ~dones: a step that fails and times out bootstraps. The env
    reports it terminated and truncated: the replay's bootstrap (~terminated | truncated) is 1 and failure
    counts (evaluation, the adaptive sampler: terminated) still see it."""
    env = MotionTrackingEnv(tiny_cfg, 4)
    _start(env)

    def sink(qpos, qvel):
        qpos[:2, 2] -= 1.0  # envs 0, 1 fail (anchor height)

    teleport(env, sink)
    env.frame[[0, 2]] = env.motion.num_frames[env.clip[[0, 2]]] - 2  # envs 0, 2 reach the clip's end
    _, _, term, trunc, info = env.step(np.zeros((4, 2), dtype=np.float32))
    assert term.tolist() == [True, True, False, False]
    assert trunc.tolist() == [True, False, True, False]
    bootstrap = ~term | trunc
    assert bootstrap.tolist() == [True, False, True, True]
    assert info["termination_terms"]["anchor_height"][:2].all()
