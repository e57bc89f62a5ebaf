"""G1 whole-body motion tracking on a physics pool (unilab.sim.physics).

One ``step``:
    backend_step  ctrl = default + scale * action (PD targets); one ``pool.step`` of ``decimation`` substeps
    update_state  advance the reference clock, then one driver (:mod:`.step_driver`): robot state, rewards and
                  terminations against the env's frame, time-outs, observations showing the next frame
    reset_done    terminated | truncated | diverged envs restart at a sampled clip frame (:mod:`.resets`)
Per-env work runs in parallel Numba drivers over envs writing per-env rows only, so results are bit-identical at any
thread count; what stays in NumPy is O(1)-per-step bookkeeping.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from unilab.sim.physics import CONTACT_FORCE
from unilab.sim.spec import FINAL
from unilab.tasks.base import Buffers, Obs, observations
from unilab.tasks.core.collisions import disable_self_collisions, matching_bodies
from unilab.tasks.core.contacts import require_contact_forces
from unilab.tasks.core.driver_env import DriverEnv
from unilab.tasks.core.model import load_task_model
from unilab.tasks.core.randomization import observed_joint_pos_bias
from unilab.tasks.core.symmetry import partner_indices, partner_name
from unilab.tasks.env_streams import env_streams
from unilab.tasks.g1_motion_tracking.config import MotionTrackingConfig, motion_file_list
from unilab.tasks.g1_motion_tracking.motion import MotionLibrary
from unilab.tasks.g1_motion_tracking.observations import obs_layout
from unilab.tasks.g1_motion_tracking.resets import StartFrameSampler, start_state
from unilab.tasks.g1_motion_tracking.rewards import TERM_NAMES, RewardComputer
from unilab.tasks.g1_motion_tracking.step_driver import RESTART, SPLIT, STEP, step_driver, step_driver_source
from unilab.tasks.g1_motion_tracking.terminations import CONDITION_NAMES
from unilab.tasks.g1_motion_tracking.terms import GATHERED, STEP_STATE, TaskArrays


def task_motion_files(cfg: MotionTrackingConfig) -> list[Path]:
    """The configured clips (a user's list, or the built-in G1 clips)."""
    files = motion_file_list(cfg.motion_files)  # also when set after construction
    if files:
        return [Path(p).expanduser() for p in files]
    from unilab.assets import g1  # noqa: PLC0415 - only for the built-in G1 assets

    return g1.motion_paths(include_object_clips=cfg.include_object_clips,
                           include_terrain_clips=cfg.include_terrain_clips)


class MotionTrackingEnv(DriverEnv):
    """Vectorised motion-tracking env (``unilab.tasks.base.VecEnv``); ``pool_kwargs``: the physics pool's options
    (``sim.*``; ``contacts`` unless given: on only for the undesired_contacts term, the one reading contacts); ``seed``:
    of the start-frame sampling, reset noise and observation noise."""

    step_stages, split_stages = STEP, SPLIT
    reward_term_names, termination_names = TERM_NAMES, CONDITION_NAMES

    def __init__(self, cfg: MotionTrackingConfig, num_envs: int, pool_kwargs: dict | None = None, seed: int = 0):
        super().__init__(cfg, num_envs)
        self.rng = np.random.default_rng(seed)
        base = load_task_model(cfg)
        if not cfg.self_collisions:
            disable_self_collisions(base, cfg.anchor_body)

        # the motion library only needs kinematics, so it can use the model before the actuator change
        self.motion = lib = MotionLibrary(base, task_motion_files(cfg), self.control_dt, cfg.tracked_bodies,
                                          cfg.anchor_body)
        act = self._actuate(base, lib.joint_names)
        nj = len(self.joint_names)
        self.soft_lo, self.soft_hi = act.limits(cfg.soft_joint_limit_factor)
        # reset joint noise is clipped to holosoma's simulator soft limits (robot soft_dof_pos_limit)
        self.reset_lo, self.reset_hi = act.limits(cfg.reset.noise.joint_pos_limit_factor)

        # the undesired_contacts bodies (under the anchor's root); their net contact force is computed in a
        # step only for a model with an acceleration-stage sensor (the G1 MJCF has an accelerometer)
        contacts_cfg = cfg.rewards.undesired_contacts
        self.contact_bodies = np.zeros(0, dtype=np.int64)
        if contacts_cfg.weight != 0:
            require_contact_forces(self.model, "task.rewards.undesired_contacts (or set its weight to 0)")
            self.contact_bodies = matching_bodies(self.model, cfg.anchor_body, contacts_cfg.bodies,
                                                  "task.rewards.undesired_contacts.bodies", full=False)
        self._make_pool(pool_kwargs, seed, cfg.anchor_body,
                        ("task.rewards.undesired_contacts needs the pool's contacts; set its weight to 0 or drop "
                         "contacts=False") if self.contact_bodies.size else None)

        # kernels' constant inputs
        self.body_ids = lib.body_ids.astype(np.int64)
        self.anchor = int(lib.anchor_index)
        self.ee_index = np.array([cfg.tracked_bodies.index(b) for b in cfg.end_effector_bodies], dtype=np.int64)
        self.qpos_adr = lib.joint_qposadr.astype(np.int64)
        self.dof_adr = lib.joint_dofadr.astype(np.int64)
        self.rewards = RewardComputer(cfg.rewards, self.control_dt if cfg.reward_times_dt else 1.0)
        self.sampler = StartFrameSampler(lib, cfg.reset)
        self.layout = obs_layout(nj, len(cfg.tracked_bodies), cfg.policy_obs)  # the actor set picks the driver
        self.noise_scale = self.layout.noise_scale(cfg.obs_noise)
        try:
            bodies = partner_indices(cfg.tracked_bodies, "tracked body")
            partner_indices(cfg.end_effector_bodies, "end-effector body")
            if partner_name(cfg.anchor_body) != cfg.anchor_body:
                raise ValueError(f"mirror: the anchor body {cfg.anchor_body!r} is not on the mid-plane")
            self.mirror = self.layout.env_mirror(base, [int(base.joint(n).id) for n in self.joint_names],
                                                 self.act_joint, self.default_joint_pos, bodies)
        except ValueError as err:  # a task without a mirror trains as before; algo.use_symmetry refuses it
            self.mirror, self.mirror_error = None, str(err)
        self.max_episode_steps = (np.inf if cfg.max_episode_length_s is None
                                  else int(round(cfg.max_episode_length_s / self.control_dt)))

        n = self.num_envs
        self.clip, self.frame = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        # per-env state (rows: .terms): buffers, the terms' struct and the gather stage's tuple
        self._allocate(seed, GATHERED, STEP_STATE, B=len(self.body_ids), K=self.contact_bodies.size)
        self._contacts = (getattr(self.pool, CONTACT_FORCE, np.zeros((n, 0, 3))), self.contact_bodies,
                          float(contacts_cfg.threshold), self.state.contact_age)
        self.reset_noise_streams = env_streams(seed, n, tag=2)  # reset noise, drawn in the start-state driver
        self.arrays = TaskArrays(
            anchor=self.anchor, ee_index=self.ee_index, **vars(self.state),
            ref_body_pos=lib.body_pos_w, ref_body_quat=lib.body_quat_w, ref_body_lin=lib.body_lin_vel_w,
            ref_body_ang=lib.body_ang_vel_w, ref_joint_pos=lib.joint_pos, ref_joint_vel=lib.joint_vel,
            soft_lo=self.soft_lo, soft_hi=self.soft_hi, default_joint_pos=self.default_joint_pos,
            action_bound=self.action_bound, joint_pos_bias=observed_joint_pos_bias(self.randomizer, nj),
        )
        self._params = step_driver_source(self.layout).values(cfg)
        self._step_driver = step_driver(self.layout)

    # ------------------------------------------------------------------
    def run_stages(self, stages: int, rows: np.ndarray, out: Buffers, bad: np.ndarray | None = None,
                   info: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """The step driver's ``stages`` (:mod:`.step_driver`) for envs ``rows``, writing into ``out`` (``final_*``
        for FINALS); for TERMINATE, ``bad`` the pool's bad-env mask and ``info`` this step's ``(terms, conds)``."""
        p, lib = self.pool, self.motion
        terms_info, conds_info = self._no_info if info is None else info
        policy, critic = out["obs"], out["critic_obs"]
        self._step_driver(
            stages, self.arrays, rows, (self.clip, self.frame, lib.clip_offsets, lib.num_frames),
            (p.body_pos_w, p.body_quat_w, p.body_lin_vel_w, p.body_ang_vel_w, p.qpos, p.qvel),
            (self.body_ids, self.qpos_adr, self.dof_adr),
            self._gathered,
            self._params, self.rewards.weights, self.layout.offsets, self.noise_scale,
            self.obs_noise_streams, self.book.lengths, self.book.returns, float(self.max_episode_steps),
            self._bad if bad is None else bad, self.state.action, self.state.last_action, self._terms, self._reward,
            self._conds, self._failed, out["reward"], out["terminated"], out["truncated"], self._done, policy, critic,
            out.get(FINAL + "obs", policy), out.get(FINAL + "critic_obs", critic), terms_info, conds_info,
            self._contacts, self._obs_clip)

    # ------------------------------------------------------------------
    def start_at(self, clips: np.ndarray, frames: np.ndarray, out: Buffers | None = None) -> Obs:
        """Put env ``e`` exactly at frame ``frames[e]`` of clip ``clips[e]``, without reset noise (evaluation rollouts;
        with ``auto_reset = False`` the envs then follow their clips to the end); return the observations."""
        out = self.buffers() if out is None else out
        clips = np.asarray(clips, dtype=np.int64)
        frames = np.asarray(frames, dtype=np.int64)
        if clips.shape != (self.num_envs,) or frames.shape != (self.num_envs,):
            raise ValueError(f"start_at needs one clip and one frame per env ({self.num_envs}), "
                             f"got shapes {clips.shape} and {frames.shape}")
        idx = self.motion.flat_index(clips, frames)  # checks the clip ids
        if (frames < 0).any() or (frames >= self.motion.num_frames[clips]).any():
            raise IndexError("start_at frames must lie inside their clips")
        rows = self._all_rows
        self.clip[:], self.frame[:], self.state.ref_index[:] = clips, frames, idx
        self.state.last_action[:] = 0.0
        self._place(rows, self.motion.qpos[idx], self.motion.qvel[idx])  # with reset-time draws, as a restart
        self.book.reset_all()
        self.run_stages(RESTART, rows, out)
        return observations(out)

    def _restart(self, rows: np.ndarray) -> None:
        """Sample start frames for ``rows`` and write the (noisy) reference state into the pool."""
        starts = self.sampler.sample(rows.shape[0], self.rng)
        # clip, frame, ref_index and last_action of the rows are set in the start-state region too
        placed = (self.clip, self.frame, self.state.ref_index, self.state.last_action)
        qpos, qvel = start_state(self.motion, rows, starts, placed, self.cfg.reset.noise, self.reset_noise_streams,
                                 self.qpos_adr, self.reset_lo, self.reset_hi)
        self._place(rows, qpos, qvel)

    def before_update(self) -> None:
        self.frame += 1

    def record_ended(self, done: np.ndarray, out: Buffers) -> None:
        # failure statistics decay every step, so record even when nothing ended
        done_ids = np.flatnonzero(done)
        self.sampler.record(self.clip[done_ids], self.frame[done_ids], out["terminated"][done_ids])

    def restart_rows(self, ids: np.ndarray, out: Buffers) -> None:
        self._restart(ids)
        self.run_stages(RESTART, ids, out)

    # ------------------------------------------------------------------ video (play)
    def reference_qpos(self, env: int = 0) -> np.ndarray:
        """Model ``qpos`` of the reference frame env ``env`` tracks now (play's ghost)."""
        return self.motion.qpos[self.state.ref_index[env]].copy()

    def body_error_mm(self, env: int = 0) -> float:
        """Mean world-frame position error of env ``env``'s tracked bodies against the reference, in mm."""
        err = self.state.body_pos[env] - self.motion.body_pos_w[self.state.ref_index[env]]
        return float(1000.0 * np.linalg.norm(err, axis=-1).mean())

    def overlay_text(self, env: int = 0) -> str:
        """Clip name, reference frame and body error of env ``env`` (play's text overlay)."""
        clip = int(self.clip[env])
        frame = int(self.state.ref_index[env] - self.motion.clip_offsets[clip])
        last = int(self.motion.num_frames[clip]) - 1
        return f"{self.motion.files[clip].stem}\nframe {frame}/{last}  body err {self.body_error_mm(env):.0f} mm"
