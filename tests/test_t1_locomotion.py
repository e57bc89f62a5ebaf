"""Booster T1 locomotion (``--task t1_locomotion``): the locomotion task with the T1 robot preset. Each item of holosoma
0.0.3's T1 FastSAC recipe is computed from its config as the wheel holds it (tests/holosoma_config.py) and compared
with the env's; the left/right mirror derived from the MJCF against holosoma's symmetry map and against physics; and a
short training run of the recipe through unilab-eval, unilab-export, sim2sim and play."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import mujoco
import numpy as np
import pytest
from holosoma_config import class_default, param_default, preset
from reference_helpers import state_mirror  # tests/ is on the path (pytest's rootdir)

from unilab.cli.config import compose_config
from unilab.tasks.core.collisions import matching_bodies
from unilab.tasks.core.joints import match_joint_values
from unilab.tasks.core.symmetry import REFLECT, partner_name
from unilab.tasks.registry import make_env, task_config

pytestmark = pytest.mark.g1
ROBOT = ("config_values/robot.py", "t1_29dof_waist_wrist")
LOCO = "config_values/loco/t1/{}.py"
N = 4


@pytest.fixture(scope="module")
def holo() -> dict:
    return preset(*ROBOT)


@pytest.fixture(scope="module")
def env():
    e = make_env("t1_locomotion", task_config("t1_locomotion", {}), N, pool_kwargs={"nthread": 1}, seed=2)
    e.reset()
    yield e
    e.close()


def _contains(names, words) -> list[str]:
    """holosoma's body selection: the names containing one of ``words``."""
    return [n for n in names if any(w in n for w in words)]


def _body_names(env) -> list[str]:
    return [env.model.body(b).name for b in range(env.model.nbody)]


def test_joints_default_pose_gains_limits_and_action_are_holosomas(holo, env):
    """robot.py: dof_names (our model's order), init_state default angles, control.stiffness / damping (a key applies
    to every joint whose name contains it, as JointPositionActionTerm._configure_pd_gains), dof_effort_limit_list
    (the URDF's, which IsaacGym clamps torques to), the joint limits, and FastSAC's action bound over action_scale."""
    names = holo["dof_names"]
    assert env.joint_names == names and list(env.act_joint) == list(range(len(names)))
    q0 = np.array([holo["init_state"]["default_joint_angles"][n] for n in names])
    np.testing.assert_array_equal(env.default_joint_pos, q0)
    control = holo["control"]
    for ours, key in ((env.kp, "stiffness"), (env.kd, "damping")):
        want = [next(v for k, v in reversed(control[key].items()) if k in n) for n in names]
        np.testing.assert_array_equal(ours, want, err_msg=key)
    np.testing.assert_array_equal(env.effort, holo["dof_effort_limit_list"])
    lo, hi = np.array(holo["dof_pos_lower_limit_list"]), np.array(holo["dof_pos_upper_limit_list"])
    np.testing.assert_allclose(env.joint_lo, lo, atol=1e-9)
    np.testing.assert_allclose(env.joint_hi, hi, atol=1e-9)
    bound = np.maximum(np.abs(lo - q0), np.abs(hi - q0)) / control["action_scale"]
    np.testing.assert_allclose(env.action_bound, bound, rtol=1e-12)
    by_effort = control.get("action_scales_by_effort_limit_over_p_gain",
                            class_default("config_types/robot.py", "RobotControlConfig",
                                          "action_scales_by_effort_limit_over_p_gain"))
    assert not by_effort and env.cfg.action_scale_mode == "radians"
    np.testing.assert_allclose(env.action_scale, control["action_scale"] * bound, rtol=1e-12)
    assert env.cfg.self_collisions == holo["asset"]["enable_self_collisions"] is False


def test_bodies_and_start_height_are_holosomas(holo, env):
    """Feet (foot_body_name), foot points (foot_height_name), termination bodies (terminate_after_contacts_on: names
    containing a word), the start height (init_state pos z), the torso (torso_name) and the links whose masses the
    recipe scales (randomize_link_body_names)."""
    names, robot = _body_names(env), env.cfg.robot
    assert [names[b] for b in env.feet] == _contains(names, [holo["foot_body_name"]])
    assert [names[b] for b in env.foot_points] == _contains(names, [holo["foot_height_name"]])
    assert sorted(names[b] for b in env.termination_bodies) == sorted(
        _contains(names, holo["terminate_after_contacts_on"]))
    assert robot.base_height == holo["init_state"]["pos"][2]
    assert names[int(env.model.jnt_bodyid[0])] == robot.base_body == holo["torso_name"]
    mass = env.cfg.randomization.mass
    assert mass.added_body == env.cfg.randomization.base_com.body == holo["torso_name"]
    links = matching_bodies(env.model, robot.base_body, mass.bodies, "bodies")
    assert sorted(names[b] for b in links) == sorted(holo["randomize_link_body_names"])


def test_observations_are_holosomas(env):
    """observation.py t1_29dof_loco_single_wolinvel: the actor's terms in order with their scales and noise (noise
    drawn before the scale), the critic's base linear velocity scale."""
    groups = preset(LOCO.format("observation"), "t1_29dof_loco_single_wolinvel")["groups"]
    ours = {"dof_pos": "joint_pos", "dof_vel": "joint_vel"}
    actor = groups["actor_obs"]["terms"]
    assert [ours.get(k, k) for k in actor] == list(env.layout.policy_slices)
    noise = env.noise_scale
    for name, term in actor.items():
        piece = ours.get(name, name)
        assert env.obs_scales.get(piece, 1.0) == term["scale"], name
        np.testing.assert_allclose(noise[env.layout.slices[piece]], term["noise"] * term["scale"], err_msg=name)
    assert env.obs_scales["base_lin_vel"] == groups["critic_obs"]["terms"]["base_lin_vel"]["scale"]
    assert set(groups["critic_obs"]["terms"]) == {*actor, "base_lin_vel"}
    assert all(t["noise"] == 0 for t in groups["critic_obs"]["terms"].values())


def test_rewards_and_curriculum_are_holosomas(env):
    """reward.py t1_29dof_loco_fast_sac (weights, sigmas, parameters, curriculum tags, the pose term's per-joint
    weights) and curriculum.py t1_29dof_curriculum_fast_sac."""
    terms = preset(LOCO.format("reward"), "t1_29dof_loco_fast_sac")["terms"]
    rewards = env.cfg.rewards
    assert {name.removeprefix("penalty_") for name in terms} == set(dataclasses.asdict(rewards))
    params = {"tracking_sigma": "tracking_sigma", "swing_height": "swing_height", "close_feet_threshold": "threshold"}
    for name, term in terms.items():
        ours = getattr(rewards, name.removeprefix("penalty_"))
        assert ours.weight == term["weight"] and ours.curriculum == ("penalty_curriculum" in term.get("tags", [])), name
        for key, value in term["params"].items():
            if key != "pose_weights":
                assert getattr(ours, params[key]) == value, (name, key)
    pose = match_joint_values(rewards.pose.joint_weights, env.joint_names, None, "pose")
    np.testing.assert_array_equal(pose, terms["pose"]["params"]["pose_weights"])
    np.testing.assert_array_equal(env.arrays.pose_weights, pose)
    cur = preset(LOCO.format("curriculum"), "t1_29dof_curriculum_fast_sac")["setup_terms"]
    for key, value in cur["penalty_curriculum"]["params"].items():
        if key != "tag":
            assert getattr(env.cfg.curriculum, key) == value, key
    assert env.cfg.curriculum.average_over == param_default("managers/curriculum/terms/locomotion.py",
                                                            "num_compute_average_epl")


def test_commands_gait_termination_and_episode_length_are_holosomas(env):
    """command.py (ranges, stand probability, resampling time; LocomotionGait gets no parameters: its defaults),
    termination.py (contact force threshold) and the simulator's episode length."""
    command = preset(LOCO.format("command"), "t1_29dof_command")
    params = command["setup_terms"]["locomotion_command"]["params"]
    c = env.cfg.commands
    assert (c.lin_vel_x, c.lin_vel_y, c.ang_vel_yaw) == tuple(params["command_ranges"][k] for k in
                                                              ("lin_vel_x", "lin_vel_y", "ang_vel_yaw"))
    assert c.stand_prob == params["stand_prob"]
    assert c.resampling_time_s == command["params"]["locomotion_command_resampling_time"]
    assert "params" not in command["setup_terms"]["locomotion_gait"]
    gait = "managers/command/terms/locomotion.py"
    assert env.cfg.gait.period_s == param_default(gait, "gait_period")
    assert env.cfg.gait.frequency_width == param_default(gait, "gait_period_randomization_width") == 0.0
    contact = preset(LOCO.format("termination"), "t1_29dof_termination")["terms"]["contact"]["params"]
    assert env.cfg.termination_force == contact["force_threshold"]
    assert env.cfg.max_episode_length_s == class_default("config_types/simulator.py", "SimEngineConfig",
                                                         "max_episode_length_s")


def test_randomization_is_holosomas(env):
    """randomization.py t1_29dof_randomization: pushes, action delay, PD gains, masses, friction, the centre of mass
    (off), encoder offsets and torque noise (off), the reset's joint scale."""
    rand = preset(LOCO.format("randomization"), "t1_29dof_randomization")
    setup = {k: v["params"] for k, v in rand["setup_terms"].items()}
    cfg = env.cfg
    r = cfg.randomization
    push = setup["push_randomizer_state"]
    assert (cfg.push.enabled, cfg.push.interval_s, cfg.push.max_vel) == (push["enabled"], push["push_interval_s"],
                                                                       push["max_push_vel"])
    delay = setup["setup_action_delay_buffers"]
    assert (r.active("action_delay"), r.action_delay.steps) == (delay["enabled"], delay["ctrl_delay_step_range"])
    pd = setup["actuator_randomizer_state"]
    assert (r.active("pd_gains"), r.pd_gains.kp_scale, r.pd_gains.kd_scale) == (pd["enable_pd_gain"], pd["kp_range"],
                                                                               pd["kd_range"])
    assert not pd["enable_rfi_lim"] and not setup["setup_torque_rfi"]["enabled"]
    mass = setup["mass_randomizer"]
    assert r.active("mass") == mass["enable_link_mass"] == mass["enable_base_mass"]
    assert (r.mass.scale, r.mass.added) == (mass["link_mass_range"], mass["added_mass_range"])
    friction = setup["randomize_friction_startup"]
    assert (r.active("friction"), r.friction.range) == (friction["enabled"], friction["friction_range"])
    com = setup["randomize_base_com_startup"]
    assert r.active("base_com") == com["enabled"] is False
    assert [r.base_com.x, r.base_com.y, r.base_com.z] == [com["base_com_range"][k] for k in "xyz"]
    assert r.active("joint_pos_bias") == setup["setup_dof_pos_bias"]["enabled"] is False
    dof = rand["reset_terms"]["randomize_dof_state"]["params"]
    assert cfg.reset_joint_scale == dof["joint_pos_scale_range"] and dof["joint_vel_range"] == [0.0, 0.0]


def test_learner_presets_are_holosomas():
    """experiment.py: T1's t1_29dof_fast_sac is fast_sac with 100000 iterations and symmetry, the G1's the same with
    50000: sac_t1_loco is sac_loco with that one difference; plain train picks it (sac_cpu_loco without CUDA)."""
    from unilab.cli.config import choose_recipe, split_argv, to_run_spec

    t1 = preset("config_values/loco/t1/experiment.py", "t1_29dof_fast_sac")["algo"]
    g1 = preset("config_values/loco/g1/experiment.py", "g1_29dof_fast_sac")["algo"]
    assert t1["__base__"] == g1["__base__"] == "algo.fast_sac"
    diff = {k: v for k, v in t1["config"].items() if g1["config"].get(k) != v}
    assert diff == {"num_learning_iterations": 100_000} and t1["config"]["use_symmetry"]
    ours = {name: compose_config([f"algo={name}", "task=t1_locomotion"])["algo"]
            for name in ("sac_t1_loco", "sac_loco")}
    assert {k: v for k, v in ours["sac_t1_loco"].items() if ours["sac_loco"][k] != v} == {"max_iterations": 100_000}
    for cuda, name in ((True, "sac_t1_loco"), (False, "sac_cpu_loco")):
        overrides, line = choose_recipe(split_argv(["--task", "t1_locomotion"])[0], cuda=cuda)
        assert line.startswith(f"unilab: recipe {name} (")
        assert to_run_spec(compose_config(overrides), check_paths=False).algo.use_symmetry


def test_mirror_is_holosomas_symmetry_map_and_twice_the_identity(holo, env):
    """The mirror derived from the MJCF (partner names, signs from the joint axes) is holosoma's symmetry_joint_names
    and flip_sign_joint_names; applied twice every map is the identity."""
    names = env.joint_names
    perm, sign = (np.asarray(x) for x in env.spec.mirror["action"])
    assert [names[p] for p in perm] == [holo["symmetry_joint_names"][n] for n in names]
    assert [n for n, s in zip(names, sign, strict=True) if s < 0] == holo["flip_sign_joint_names"]
    for key in ("obs", "critic_obs", "action"):
        perm, sign = (np.asarray(x) for x in env.spec.mirror[key])
        np.testing.assert_array_equal(perm[perm], np.arange(perm.size))
        np.testing.assert_array_equal(sign[perm] * sign, 1.0)
    sm = state_mirror(env.pool.model)
    rng = np.random.default_rng(0)
    qpos, qvel = rng.normal(size=(3, env.pool.qpos.shape[1])), rng.normal(size=(3, env.pool.qvel.shape[1]))
    np.testing.assert_array_equal(sm.qpos(sm.qpos(qpos)), qpos)
    np.testing.assert_array_equal(sm.qvel(sm.qvel(qvel)), qvel)


def _symmetrise_inertias(pool, sm) -> float:
    """Give every body the mean of its inertia and its partner's mirror image (a mid-plane body: its own), per env
    (the MJCF's two sides differ, e.g. the shanks' masses 1.73 / 1.79 kg); returns the largest mass change (kg)."""
    m = pool.model
    joints = list(range(1, m.njnt))
    partner = {b: b for b in range(m.nbody)}
    for k, j in enumerate(joints):
        partner[int(m.jnt_bodyid[j])] = int(m.jnt_bodyid[joints[sm.joints.perm[k]]])
    for b in range(m.nbody):
        name = m.body(b).name
        if m.body_jntnum[b] == 0 and partner_name(name) != name:
            partner[b] = m.body(partner_name(name)).id
    reflect = np.diag(REFLECT)

    def tensor(b):
        rot = np.empty(9)
        mujoco.mju_quat2Mat(rot, m.body_iquat[b])
        rot = rot.reshape(3, 3)
        return rot @ np.diag(m.body_inertia[b]) @ rot.T

    mass, ipos, iquat, inertia = (pool.expand(f) for f in ("body_mass", "body_ipos", "body_iquat", "body_inertia"))
    for b in range(1, m.nbody):
        p = partner[b]
        values, axes = np.linalg.eigh(0.5 * (tensor(b) + reflect @ tensor(p) @ reflect))
        axes[:, 0] *= np.sign(np.linalg.det(axes))
        quat = np.empty(4)
        mujoco.mju_mat2Quat(quat, axes.reshape(-1))
        mass[:, b] = 0.5 * (m.body_mass[b] + m.body_mass[p])
        ipos[:, b] = 0.5 * (m.body_ipos[b] + REFLECT * m.body_ipos[p])
        iquat[:, b], inertia[:, b] = quat, values
    pool.set_const()
    return float(np.abs(mass[0] - m.body_mass).max())


def test_mirrored_state_steps_to_the_mirrored_next_state():
    """In the T1 env, env 1 holds the mirror image of env 0 (state, command, the legs' phases swapped) and gets the
    mirrored action: after five steps on the floor (contacts included) its state and observation are the mirror
    images of env 0's. The MJCF's two sides differ slightly in their inertias, so the bodies first get symmetric
    ones (the map is the thing tested; the MJCF as shipped drifts apart by about 0.1 rad/s in a step)."""
    cfg = task_config("t1_locomotion", {})
    cfg.randomization.enabled, cfg.push.enabled = False, False
    env = make_env("t1_locomotion", cfg, 2, pool_kwargs={"nthread": 1}, seed=1)
    try:
        env.reset()
        p, s = env.pool, env.state
        sm = state_mirror(p.model)
        assert 0.01 < _symmetrise_inertias(p, sm) < 0.1
        rng = np.random.default_rng(3)
        qpos, qvel = p.qpos[:1].copy(), rng.normal(0.0, 0.3, (1, p.qvel.shape[1]))
        qpos[0, 7:] += rng.normal(0.0, 0.1, qpos.shape[1] - 7)
        p.reset(env._all_rows, np.concatenate([qpos, sm.qpos(qpos)]), np.concatenate([qvel, sm.qvel(qvel)]))
        s.command[:] = [[0.4, 0.3, -0.5], [0.4, -0.3, 0.5]]
        s.phase_offset[1], s.phase_dt[1] = s.phase_offset[0, ::-1], s.phase_dt[0]
        env.auto_reset = False
        perm, sign = (np.asarray(x) for x in env.spec.mirror["action"])
        for _ in range(5):
            a = rng.uniform(-0.3, 0.3, env.action_dim)
            obs = env.step(np.stack([a, a[perm] * sign]).astype(np.float32))[0]
        np.testing.assert_allclose(sm.qpos(p.qpos[0]), p.qpos[1], atol=1e-9)
        np.testing.assert_allclose(sm.qvel(p.qvel[0]), p.qvel[1], atol=1e-8)
        assert np.abs(p.qvel[0]).max() > 1.0  # it moved
        perm, sign = (np.asarray(x) for x in env.spec.mirror["critic_obs"])
        crit = obs["critic_obs"]
        np.testing.assert_allclose(crit[0][perm] * sign, crit[1], atol=1e-5)
        assert np.abs(crit[0] - crit[1]).max() > 0.1
    finally:
        env.close()


@pytest.fixture(scope="module")
def t1_run(tmp_path_factory):
    """Plain `train --task t1_locomotion` (no CUDA: sac_cpu_loco, symmetry and randomization on) at tiny sizes."""
    root = tmp_path_factory.mktemp("t1_run")
    cmd = [sys.executable, "-m", "unilab.cli.train", "--task", "t1_locomotion", "algo.num_envs=16",
           "algo.max_iterations=20", "algo.learning_starts=5", "algo.batch_size=64", "algo.actor_hidden_dims=[32]",
           "algo.critic_hidden_dims=[32]", "training.no_play=true", "training.log_interval=5",
           f"training.log_root={root}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "recipe sac_cpu_loco" in proc.stdout or "recipe sac_t1_loco" in proc.stdout
    return next((root / "fast_sac" / "t1_locomotion").glob("*_mujoco"))


def test_a_short_t1_run_trains_evaluates_exports_and_walks_in_sim2sim(t1_run, tmp_path):
    """The run logs the task's terms and writes a checkpoint that unilab-eval measures per command bin, unilab-export
    describes (T1 joints, gains, base, termination bodies, its observation scales) and sim2sim steps from that
    file alone as the env does."""
    from script_modules import load_script

    from unilab.algo.sac.agent import FastSAC
    from unilab.cli.eval import main as eval_main
    from unilab.cli.export import main as export_main
    from unilab.deploy.export import read_metadata
    from unilab.eval.rollout import agent_policy
    from unilab.runtime.checkpoint import load_checkpoint
    from unilab.tasks.g1_locomotion.evaluation import eval_config
    from unilab.telemetry.scalars import read_scalars

    assert {"reward/tracking_lin_vel", "reward/feet_phase", "curriculum/penalty_scale",
            "randomization/mass_scale"} <= set(read_scalars(t1_run))
    out = tmp_path / "eval.json"
    assert eval_main([str(t1_run), "task.max_episode_length_s=1.0", "--envs-per-bin", "1", "--threads", "1",
                      "--no-progress", "--json", str(out)]) == 0  # the task is the checkpoint's
    report = json.loads(out.read_text())
    assert report["task"] == "t1_locomotion" and report["iteration"] == 20 and len(report["bins"]) == 4

    onnx_path = tmp_path / "t1.onnx"
    assert export_main([str(t1_run), "--out", str(onnx_path)]) == 0
    meta = read_metadata(onnx_path)
    assert meta["task"] == "t1_locomotion" and meta["task_kind"] == "locomotion"
    assert meta["joint_names"][:2] == ["AAHead_yaw", "Head_pitch"] and meta["base_body"] == "Trunk"
    assert meta["model_xml"].endswith("robots/t1/scene_t1_29dof.xml") and "Trunk" in meta["termination_bodies"]
    pieces = {p["name"]: p for p in meta["obs_layout"]}
    assert pieces["base_ang_vel"]["scale"] == 1.0 and pieces["joint_vel"]["scale"] == 0.1
    assert meta["effort_limit"][20] == 60.0  # the left knee: holosoma's limit, not the MJCF motor's 65

    steps, command = 20, (0.3, 0.0, 0.2)
    res = load_script("deploy/sim2sim.py").run_locomotion(onnx_path, steps=steps, command=command)
    got = np.array(res["per_step"]["base_velocity"])
    cfg = eval_config(dataclasses.replace(task_config("t1_locomotion", {}), reset_joint_scale=[1.0, 1.0]),
                      pushes=False)
    env = make_env("t1_locomotion", cfg, 1, pool_kwargs={"nthread": 1})
    agent = FastSAC.from_checkpoint(load_checkpoint(t1_run / "model_20.pt")[0]["agent"], device="cpu")
    try:
        env.evaluate(np.array([command]))
        obs, policy, want = env.reset(), agent_policy(agent), []
        for _ in range(min(steps, len(got))):
            obs = env.step(policy(obs))[0]
            want.append([env.state.base_lin_b[0, 0], env.state.base_lin_b[0, 1], env.state.base_ang_b[0, 2]])
    finally:
        env.close()
    np.testing.assert_allclose(got[:len(want)], np.array(want), rtol=1e-3, atol=1e-4)


def test_play_films_a_t1_run(t1_run, gl_backend, tmp_path):
    from unilab.cli.play import main as play_main

    assert play_main([str(t1_run), "--num-envs", "1", "--steps", "5", "--width", "160", "--height", "120", "--out",
                      str(tmp_path / "t1.mp4")]) == 0  # the task is the checkpoint's
    assert (tmp_path / "t1.mp4").stat().st_size > 0


T1_MJCF_SHA256 = "1ed4354ae9db9794d5e10c4a6d6a17f19bd1a77abf10d0602b2ebf5e2c3b5b83"
"""holosoma 0.0.3's data/robots/t1/t1_29dof.xml: the model every T1 number in docs/RECIPE.md was checked on."""


def test_t1_scene_is_the_wheels_mjcf_on_a_floor():
    """The asset: holosoma's t1_29dof.xml (its hash pinned, extracted with its 64 meshes) included by unilab's scene,
    which adds the G1 scene's floor and nothing on the robot."""
    from unilab.assets import holosoma

    root = holosoma.ensure_assets(progress=False).root
    assert holosoma.sha256_file(root / "robots/t1/t1_29dof.xml") == T1_MJCF_SHA256
    assert len(list((root / "robots/t1/meshes").glob("*.STL"))) == 64
    scene = root / holosoma.SCENES["t1"]
    robot = mujoco.MjModel.from_xml_path(str(root / "robots/t1/t1_29dof.xml"))
    model = mujoco.MjModel.from_xml_path(str(scene))
    assert model.nbody == robot.nbody and model.njnt == robot.njnt and model.nu == robot.nu == 29
    assert model.ngeom == robot.ngeom + 1 and model.geom("floor").bodyid == 0
    np.testing.assert_array_equal(model.body_mass, robot.body_mass)
    assert holosoma.read_manifest(root)[holosoma.SCENES["t1"]]["sha256"] == holosoma.sha256_file(scene)
