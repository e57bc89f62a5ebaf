"""G1 whole-body motion tracking on a physics pool (unilab.sim.physics).

One ``step``:
    backend_step  ctrl = default + scale * action (PD targets); one ``pool.step`` of ``decimation`` substeps
    update_state  advance the reference clock, then the step driver (:mod:`unilab.tasks.core.driver`): reference
                  frames and robot state, the contact history, rewards and terminations against the env's frame,
                  time-outs (the clip's end), observations showing the next frame
    reset_done    terminated | truncated | diverged envs restart at a sampled clip frame (:mod:`.resets`)
Per-env work runs in parallel Numba drivers over envs writing per-env rows only, so results are bit-identical at any
thread count; what stays in NumPy is O(1)-per-step bookkeeping.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from unilab.sim.physics import CONTACT_FORCE
from unilab.tasks.base import Buffers, Obs, observations
from unilab.tasks.core.collisions import disable_self_collisions, matching_bodies
from unilab.tasks.core.driver import RESTART, DriverRows
from unilab.tasks.core.driver_env import DriverEnv
from unilab.tasks.core.model import load_task_model
from unilab.tasks.core.randomization import observed_joint_pos_bias
from unilab.tasks.core.symmetry import partner_indices, partner_name
from unilab.tasks.env_streams import env_streams
from unilab.tasks.g1_motion_tracking.config import MotionTrackingConfig, motion_file_list
from unilab.tasks.g1_motion_tracking.motion import MotionLibrary
from unilab.tasks.g1_motion_tracking.observations import GATHER, obs_layout
from unilab.tasks.g1_motion_tracking.resets import StartFrameSampler, start_state
from unilab.tasks.g1_motion_tracking.rewards import REWARD_TERMS, STATEFUL, RewardComputer
from unilab.tasks.g1_motion_tracking.state import STATE, TaskArrays
from unilab.tasks.g1_motion_tracking.terminations import TERMINATIONS, TIMEOUTS


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

    rows = DriverRows(STATE, gather=GATHER, stateful=STATEFUL, rewards=REWARD_TERMS, terminations=TERMINATIONS,
                      timeouts=TIMEOUTS)

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

        # the undesired_contacts bodies (under the anchor's root): with them, the pool gives contact forces
        contacts_cfg = cfg.rewards.undesired_contacts
        self.contact_bodies = np.zeros(0, dtype=np.int64)
        if contacts_cfg.weight != 0:
            self.contact_bodies = matching_bodies(self.model, cfg.anchor_body, contacts_cfg.bodies,
                                                  "task.rewards.undesired_contacts.bodies", full=False)
        self._make_pool(pool_kwargs, seed, cfg.anchor_body, "task.rewards.undesired_contacts (set its weight to 0 "
                        "to turn it off)" if self.contact_bodies.size else None)

        self.body_ids = lib.body_ids.astype(np.int64)
        self.anchor = int(lib.anchor_index)
        ee_index = np.array([cfg.tracked_bodies.index(b) for b in cfg.end_effector_bodies], dtype=np.int64)
        self.qpos_adr = lib.joint_qposadr.astype(np.int64)
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
        self._allocate(seed, B=len(cfg.tracked_bodies), K=self.contact_bodies.size)
        self.reset_noise_streams = env_streams(seed, n, tag=2)  # reset noise, drawn in the start-state driver
        self.arrays = self._struct(
            TaskArrays, anchor=self.anchor, ee_index=ee_index, ref_body_pos=lib.body_pos_w,
            ref_body_quat=lib.body_quat_w, ref_body_lin=lib.body_lin_vel_w, ref_body_ang=lib.body_ang_vel_w,
            ref_joint_pos=lib.joint_pos, ref_joint_vel=lib.joint_vel, clip=self.clip, frame=self.frame,
            clip_offsets=lib.clip_offsets, num_frames=lib.num_frames, soft_lo=self.soft_lo, soft_hi=self.soft_hi,
            default_joint_pos=self.default_joint_pos, action_bound=self.action_bound,
            joint_pos_bias=observed_joint_pos_bias(self.randomizer, nj), body_ids=self.body_ids,
            qpos_adr=self.qpos_adr, dof_adr=lib.joint_dofadr.astype(np.int64), contact_bodies=self.contact_bodies,
            body_contact_force_w=getattr(self.pool, CONTACT_FORCE, np.zeros((n, 0, 3))))
        self._compile_driver()

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

    def start_state(self, rows: np.ndarray, out: Buffers) -> tuple[np.ndarray, np.ndarray]:
        """Sampled start frames for ``rows``: their (noisy) reference state."""
        starts = self.sampler.sample(rows.shape[0], self.rng)
        # clip, frame, ref_index and last_action of the rows are set in the start-state region too
        placed = (self.clip, self.frame, self.state.ref_index, self.state.last_action)
        return start_state(self.motion, rows, starts, placed, self.cfg.reset.noise, self.reset_noise_streams,
                           self.qpos_adr, self.reset_lo, self.reset_hi)

    def before_update(self) -> None:
        self.frame += 1

    def record_ended(self, done: np.ndarray, out: Buffers) -> None:
        # failure statistics decay every step, so record even when nothing ended
        done_ids = np.flatnonzero(done)
        self.sampler.record(self.clip[done_ids], self.frame[done_ids], out["terminated"][done_ids])

    def deploy_metadata(self) -> dict:
        """What an export adds to the robot's contract (``unilab.deploy.export``): the anchor, tracked and end-effector
        bodies, the termination thresholds and the reference clips."""
        cfg = self.cfg
        return {"anchor_body": cfg.anchor_body, "tracked_bodies": list(cfg.tracked_bodies),
                "end_effector_bodies": list(cfg.end_effector_bodies),
                "termination_thresholds": {n: float(getattr(cfg.terminations, n)) for n in self.termination_names},
                "motion_files": [str(Path(p).resolve()) for p in self.motion.files]}

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
