"""Where a restarted episode begins: start-frame sampling and the perturbed reference start state."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from unilab.sim.quat import qmul, qrot
from unilab.sim.work_claims import LEAST_ROWS, claimed, new_counter, num_chunks
from unilab.tasks.env_streams import next_symmetric
from unilab.tasks.g1_motion_tracking.config import ResetConfig, ResetNoiseConfig
from unilab.tasks.g1_motion_tracking.motion import MotionLibrary, library_row


class StartFrameSampler:
    """Samples (clip, frame) start points: ``uniform`` over every startable frame (all but a clip's last, so longer
    clips are sampled more), or ``adaptive`` (holosoma's ``AdaptiveTimestepsSampler``, its G1 WBT default).

    Adaptive: the ``T`` frames of all clips, concatenated, are split into ``B = T // int(1 / control_dt) + 1``
    equal bins (a little under a second; one may straddle two clips, as in holosoma's multi-clip loader). A failed
    episode (terminated, not timed out) ending at global frame ``t`` counts in bin ``min(t * B // T, B - 1)``; each
    policy step folds the previous step's counts into ``ema = a * counts + (1 - a) * ema``, so a step's starts see
    the failures up to the step before, as holosoma's restarts do. The bin weights (the config's kernel over
    ``ema + adaptive_uniform_count / B``) pick a bin ``b``; with ``u`` in [0, 1), the start is global frame
    ``floor((b + u) / B * T)``, a clip's last frame becoming its second-to-last (a start there would end at once).
    """

    def __init__(self, library: MotionLibrary, cfg: ResetConfig):
        self.cfg = cfg
        lib = self.library = library
        # uniform: startable frames are all but the last (a start on the last frame would time out at once)
        self.start_len = np.maximum(lib.num_frames - 1, 1)
        self._total_start = int(self.start_len.sum())
        self._start_offsets = np.concatenate([[0], np.cumsum(self.start_len)[:-1]]).astype(np.int64)
        # adaptive: bins over the concatenated frames
        self.total_frames = int(lib.num_frames.sum())
        self.clip_ends = (lib.clip_offsets + lib.num_frames).astype(np.int64)
        self.num_bins = self.total_frames // max(int(1.0 / lib.control_dt), 1) + 1
        kernel = float(cfg.adaptive_kernel_decay) ** np.arange(int(cfg.adaptive_kernel_size))
        self.kernel = kernel / kernel.sum()
        self.fail_ema = np.zeros(self.num_bins)
        # failures counted by the last record(), folded into fail_ema by the next one
        self.step_failures = np.zeros(self.num_bins)

    def bin_of(self, clip_ids: np.ndarray, frame_ids: np.ndarray) -> np.ndarray:
        """Adaptive bin of (clip, frame) pairs (frames clamped into their clips)."""
        lib = self.library
        frames = np.clip(frame_ids, 0, lib.num_frames[clip_ids] - 1)
        t = lib.clip_offsets[clip_ids] + frames
        return np.minimum(t * self.num_bins // max(self.total_frames, 1), self.num_bins - 1).astype(np.int64)

    def probabilities(self) -> np.ndarray:
        """Current per-bin start probabilities of the adaptive mode."""
        w = self.fail_ema + float(self.cfg.adaptive_uniform_count) / float(self.num_bins)
        size = self.kernel.shape[0]
        padded = np.concatenate([w, np.full(size - 1, w[-1])])
        smooth = np.zeros(self.num_bins)
        for k in range(size):
            smooth += self.kernel[k] * padded[k:k + self.num_bins]
        return smooth / smooth.sum()

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``n`` start points as (clip_ids, frame_ids)."""
        if self.cfg.sampling == "uniform":
            flat = rng.integers(0, self._total_start, size=n)
            clip = np.searchsorted(self._start_offsets, flat, side="right") - 1
            return clip.astype(np.int64), (flat - self._start_offsets[clip]).astype(np.int64)
        bins = rng.choice(self.num_bins, size=n, p=self.probabilities())
        g = np.floor((bins + rng.random(n)) / self.num_bins * self.total_frames).astype(np.int64)
        g = np.clip(g, 0, self.total_frames - 1)
        clip = np.minimum(np.searchsorted(self.clip_ends, g, side="right"), self.library.num_clips - 1)
        frames = g - self.library.clip_offsets[clip]
        # a start on the last frame moves one back (a one-frame clip starts on its only frame)
        frames = np.maximum(np.minimum(frames, self.library.num_frames[clip] - 2), 0)
        return clip.astype(np.int64), frames.astype(np.int64)

    def record(self, clip_ids: np.ndarray, frame_ids: np.ndarray, failed: np.ndarray) -> None:
        """Once per policy step (adaptive mode; a no-op otherwise): fold the previous step's failure counts
        into the EMA, then count this step's failed episodes, ended at (clip, frame)."""
        if self.cfg.sampling != "adaptive":
            return
        bins = self.bin_of(clip_ids[failed], frame_ids[failed]) if failed.any() else np.zeros(0, dtype=np.int64)
        _fold_failures(self.fail_ema, self.step_failures, bins, float(self.cfg.adaptive_ema))


@njit(cache=True, parallel=True, fastmath=False)
def _fold_failures(fail_ema, step_failures, bins, a):
    """``fail_ema = a * step_failures + (1 - a) * fail_ema``, then ``step_failures`` = the failures per bin."""
    keep = 1.0 - a
    for b in prange(fail_ema.shape[0]):
        fail_ema[b] = a * step_failures[b] + keep * fail_ema[b]
        step_failures[b] = 0.0
    for i in range(bins.shape[0]):  # whole counts: the order of the additions does not matter
        step_failures[bins[i]] += 1.0


def start_state(library: MotionLibrary, rows: np.ndarray, starts: tuple[np.ndarray, np.ndarray],
                episode: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], noise: ResetNoiseConfig,
                streams: np.ndarray, joint_qposadr: np.ndarray, joint_lo: np.ndarray, joint_hi: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Put envs ``rows`` at their ``starts = (clips, frames)``; return their reference (qpos, qvel) plus uniform noise.

    Env ``e = rows[k]`` also gets its ``episode = (clip, frame, ref_index, last_action)`` entries (last_action 0)
    in the same parallel region (one region, not four passes). Root velocity noise is drawn in the world frame;
    noisy joints are clipped into ``[joint_lo, joint_hi]``. Env ``e``'s draws come from ``streams[e]``, in this
    order: 3 root position, 3 roll-pitch-yaw, 3 root linear velocity, 3 root angular velocity, one per joint, all
    drawn whatever the scales (so the stream's use does not depend on them).
    """
    n = rows.shape[0]
    qpos = np.empty((n, library.qpos.shape[1]))
    qvel = np.empty((n, library.qvel.shape[1]))
    if n == 0:
        return qpos, qvel
    nj = joint_qposadr.shape[0]
    scales = np.zeros(12 + nj)
    for i, part in enumerate((noise.root_pos, noise.root_rpy, noise.root_lin_vel, noise.root_ang_vel)):
        scales[3 * i:3 * i + 3] = np.broadcast_to(np.asarray(part, dtype=np.float64), (3,))
    scales[12:] = float(noise.joint_pos)
    _start_state_driver(rows, starts, episode, library.clip_offsets, library.num_frames, library.qpos,
                        library.qvel, streams, scales, joint_qposadr.astype(np.int64), joint_lo, joint_hi, qpos, qvel)
    return qpos, qvel


@njit(cache=True, parallel=True, fastmath=False)
def _start_state_driver(rows, starts, episode, clip_offsets, num_frames, lib_qpos, lib_qvel, streams, scales, qadr,
                        lo, hi, qpos, qvel):
    """:func:`start_state`'s driver: row ``k`` into ``qpos[k]``/``qvel[k]``; ``scales``: the half-widths in draw order.

    A group whose scales are all 0 adds exactly 0 (roll-pitch-yaw and angular velocity then skip their rotation,
    joints their clip). Each expression keeps the order of the array helpers (quat_mul, quat_normalize with
    ``np.linalg.norm``'s sequential sum of four squares, quat_rotate_inv, np.clip), so a check written with them
    gives the same bits.
    """
    nj = qadr.shape[0]
    use = np.empty(5, dtype=np.bool_)  # root_pos, root_rpy, root_lin_vel, root_ang_vel, joint_pos
    for i in range(5):  # a loop: np.zeros would be a parallel loop of its own (unilab.sim.work_claims)
        use[i] = False
    for i in range(12 + nj):
        if scales[i] != 0.0:
            use[min(i // 3, 4)] = True
    new_clip, new_frame = starts
    clip, frame, ref_index, last_action = episode
    n = rows.shape[0]
    counter = new_counter()  # chunks claimed as threads come free (unilab.sim.work_claims)
    for _ in prange(num_chunks(n, LEAST_ROWS)):
        d = np.empty(12 + nj)
        for k in claimed(counter, n, LEAST_ROWS):
            e = rows[k]
            c = new_clip[k]
            clip[e] = c
            frame[e] = new_frame[k]
            ref_index[e] = library_row(clip_offsets, num_frames, c, new_frame[k])
            for j in range(last_action.shape[1]):
                last_action[e, j] = 0.0
            for i in range(12 + nj):
                x = next_symmetric(streams, e)
                d[i] = x * scales[i] if use[min(i // 3, 4)] else 0.0
            r = ref_index[e]
            for i in range(qpos.shape[1]):
                qpos[k, i] = lib_qpos[r, i]
            for i in range(qvel.shape[1]):
                qvel[k, i] = lib_qvel[r, i]
            for c in range(3):
                qpos[k, c] = qpos[k, c] + d[c]
            if use[1]:
                cr, sr = np.cos(0.5 * d[3]), np.sin(0.5 * d[3])
                cp, sp = np.cos(0.5 * d[4]), np.sin(0.5 * d[4])
                cy, sy = np.cos(0.5 * d[5]), np.sin(0.5 * d[5])
                # extrinsic x then y then z, times the reference orientation
                t = qmul(cr * cp * cy + sr * sp * sy, sr * cp * cy - cr * sp * sy, cr * sp * cy + sr * cp * sy,
                         cr * cp * sy - sr * sp * cy, qpos[k, 3], qpos[k, 4], qpos[k, 5], qpos[k, 6])
                norm = np.sqrt(t[0] * t[0] + t[1] * t[1] + t[2] * t[2] + t[3] * t[3])
                if norm > 0:
                    for c in range(4):
                        qpos[k, 3 + c] = t[c] / norm
                else:  # zero or NaN norm: identity
                    qpos[k, 3], qpos[k, 4], qpos[k, 5], qpos[k, 6] = 1.0, 0.0, 0.0, 0.0
            for c in range(3):
                qvel[k, c] = qvel[k, c] + d[6 + c]
            if use[3]:
                v = qrot(qpos[k, 3], qpos[k, 4], qpos[k, 5], qpos[k, 6], d[9], d[10], d[11], True)
                for c in range(3):
                    qvel[k, 3 + c] = qvel[k, 3 + c] + v[c]
            if use[4]:
                for j in range(nj):
                    x = qpos[k, qadr[j]] + d[12 + j]
                    if not np.isnan(x):  # np.clip: max(x, lo) then min(., hi), a NaN passes through
                        x = x if x > lo[j] else lo[j]
                        x = x if x < hi[j] else hi[j]
                    qpos[k, qadr[j]] = x
