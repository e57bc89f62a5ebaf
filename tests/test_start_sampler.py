"""Start-frame sampling: the adaptive mode against holosoma's AdaptiveTimestepsSampler, written out in NumPy."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from unilab.tasks.g1_motion_tracking.config import ResetConfig
from unilab.tasks.g1_motion_tracking.resets import StartFrameSampler
from unilab.tasks.registry import task_config


@dataclass
class _Clips:
    """What the sampler reads of a MotionLibrary: clip lengths at the control rate."""

    num_frames: np.ndarray
    control_dt: float = 0.02

    @property
    def clip_offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.num_frames)[:-1]]).astype(np.int64)

    @property
    def num_clips(self) -> int:
        return len(self.num_frames)


CLIPS = _Clips(np.array([130, 57, 301, 9], dtype=np.int64))  # 497 frames: bins straddle clip boundaries


class _Holosoma:
    """holosoma's AdaptiveTimestepsSampler (managers/command/terms/wbt.py) in NumPy, step by step."""

    def __init__(self, total: int, env_fps: int, kernel_size: int, lam: float, ratio: float, alpha: float):
        self.total, self.ratio, self.alpha, self.kernel_size = total, ratio, alpha, kernel_size
        self.num_bins = int(total // max(env_fps, 1)) + 1
        kernel = np.array([lam ** i for i in range(kernel_size)])
        self.kernel = kernel / kernel.sum()
        self.current = np.zeros(self.num_bins)
        self.bin_failed_count = np.zeros(self.num_bins)

    def update_current_bin_failed_count(self, failed_at_time_step: np.ndarray) -> None:  # at reset
        failed_bin = np.clip((failed_at_time_step * self.num_bins) // max(self.total, 1), 0, self.num_bins - 1)
        self.current += np.bincount(failed_bin, minlength=self.num_bins)

    def update_bin_failed_count(self) -> None:  # at the end of every env step
        self.bin_failed_count = self.alpha * self.current + (1 - self.alpha) * self.bin_failed_count
        self.current[:] = 0.0

    def sampling_probabilities(self) -> np.ndarray:
        p = self.bin_failed_count + self.ratio / float(self.num_bins)
        p = np.concatenate([p, np.repeat(p[-1:], self.kernel_size - 1)])  # F.pad(..., mode="replicate"), right
        p = np.array([np.dot(p[i:i + self.kernel_size], self.kernel)  # F.conv1d: a cross-correlation
                      for i in range(self.num_bins)])
        return p / p.sum()

    def frame_distribution(self, clips: _Clips) -> np.ndarray:
        """P(clip, frame) of a start, flattened over the library: bin b, u ~ U[0, 1), global frame
        floor((b + u) / B * T), its clip by searchsorted(end_idx, right=True), a last frame moved to end - 2."""
        p, nb, total = self.sampling_probabilities(), self.num_bins, self.total
        g = np.arange(total)
        dist = np.zeros(total)
        for b in range(nb):  # measure of u in [0, 1) with g <= (b + u) * T / B < g + 1
            lo = np.clip(g * nb / total - b, 0.0, 1.0)
            hi = np.clip((g + 1) * nb / total - b, 0.0, 1.0)
            dist += p[b] * (hi - lo)
        ends = clips.clip_offsets + clips.num_frames
        last = ends - 1
        moved = dist.copy()
        moved[last] = 0.0
        moved[last - 1] += dist[last]
        return moved


def _cfg(**kw) -> ResetConfig:
    return ResetConfig(sampling="adaptive", **kw)


def test_defaults_are_holosomas():
    cfg = ResetConfig()
    assert cfg.sampling == "adaptive"
    assert (cfg.adaptive_ema, cfg.adaptive_uniform_count, cfg.adaptive_kernel_size, cfg.adaptive_kernel_decay) == (
        0.001, 0.1, 1, 0.8)
    s = StartFrameSampler(CLIPS, cfg)
    assert s.num_bins == 497 // 50 + 1
    np.testing.assert_allclose(s.probabilities(), np.full(s.num_bins, 1.0 / s.num_bins))


@pytest.mark.parametrize("kw", [
    {},  # holosoma's G1 WBT numbers
    {"adaptive_ema": 0.05, "adaptive_kernel_size": 3, "adaptive_kernel_decay": 0.8, "adaptive_uniform_count": 0.3},
    {"adaptive_ema": 0.2, "adaptive_kernel_size": 4, "adaptive_kernel_decay": 0.5},
])
def test_adaptive_probabilities_follow_holosoma_step_by_step(kw):
    cfg = _cfg(**kw)
    s = StartFrameSampler(CLIPS, cfg)
    total = int(CLIPS.num_frames.sum())
    ref = _Holosoma(total, int(1 / CLIPS.control_dt), cfg.adaptive_kernel_size, cfg.adaptive_kernel_decay,
                    cfg.adaptive_uniform_count, cfg.adaptive_ema)
    assert s.num_bins == ref.num_bins
    rng = np.random.default_rng(7)
    hard = np.array([[0, 100], [2, 40], [2, 41], [3, 8]])  # where the synthetic policy tends to fail
    for step in range(200):
        n = 64
        clip = rng.integers(0, CLIPS.num_clips, n)
        frame = rng.integers(0, CLIPS.num_frames[clip])
        k = rng.integers(0, len(hard), n)
        near = rng.random(n) < 0.5
        clip, frame = np.where(near, hard[k, 0], clip), np.where(near, hard[k, 1], frame)
        failed = rng.random(n) < (0.5 if step < 120 else 0.05)  # fewer failures later: the EMA must decay
        # holosoma: reset_envs_idx counts the step's failures, then draws starts, then command.step() folds
        ref.update_current_bin_failed_count(CLIPS.clip_offsets[clip[failed]] + frame[failed])
        s.record(clip, frame, failed)
        np.testing.assert_allclose(s.probabilities(), ref.sampling_probabilities(), rtol=1e-12, atol=0)
        ref.update_bin_failed_count()
    assert s.probabilities().max() > 1.5 / s.num_bins  # the failures did move the distribution


def test_adaptive_draws_land_with_holosomas_frequencies():
    cfg = _cfg(adaptive_ema=0.3, adaptive_kernel_size=2, adaptive_kernel_decay=0.6)
    s = StartFrameSampler(CLIPS, cfg)
    ref = _Holosoma(int(CLIPS.num_frames.sum()), 50, 2, 0.6, cfg.adaptive_uniform_count, 0.3)
    clip, frame = np.array([0, 2, 2, 1]), np.array([129, 40, 250, 3])
    for step, failed in enumerate((np.array([True, True, True, False]), np.array([True, False, True, True]),
                                   np.array([False, True, False, False]))):
        if step:
            ref.update_bin_failed_count()  # the end of the step before
        ref.update_current_bin_failed_count(CLIPS.clip_offsets[clip[failed]] + frame[failed])
        s.record(clip, frame, failed)
    np.testing.assert_allclose(s.probabilities(), ref.sampling_probabilities(), rtol=1e-12, atol=0)
    p = ref.frame_distribution(CLIPS)  # what the third step's restarts draw from
    n = 400_000
    c, f = s.sample(n, np.random.default_rng(3))
    assert (f >= 0).all() and (f < CLIPS.num_frames[c] - 1).all()  # never a clip's last frame
    observed = np.bincount(CLIPS.clip_offsets[c] + f, minlength=p.shape[0])
    cells = p > 0
    assert not observed[~cells].any()
    expected = n * p[cells]
    chi2 = float((((observed[cells] - expected) ** 2) / expected).sum())
    df = int(cells.sum()) - 1
    assert chi2 < df + 5 * np.sqrt(2 * df), (chi2, df)
    # per bin too (bins of global frames, after the last-frame shift)
    bins = np.minimum(np.arange(p.shape[0]) * s.num_bins // p.shape[0], s.num_bins - 1)
    np.testing.assert_allclose(np.bincount(bins, observed, s.num_bins) / n, np.bincount(bins, p, s.num_bins),
                               atol=4e-3)


def test_one_frame_clip_starts_on_its_only_frame():
    clips = _Clips(np.array([1, 60], dtype=np.int64))
    s = StartFrameSampler(clips, _cfg())
    c, f = s.sample(20_000, np.random.default_rng(0))
    assert (f[c == 0] == 0).all() and (c == 0).any()
    assert (f[c == 1] <= 58).all() and (f[c == 1] >= 0).all()


def test_uniform_mode_unchanged():
    s = StartFrameSampler(CLIPS, ResetConfig(sampling="uniform"))
    start_len = CLIPS.num_frames - 1
    offsets = np.concatenate([[0], np.cumsum(start_len)[:-1]])
    flat = np.random.default_rng(5).integers(0, int(start_len.sum()), size=5000)
    want_clip = np.searchsorted(offsets, flat, side="right") - 1
    c, f = s.sample(5000, np.random.default_rng(5))
    assert np.array_equal(c, want_clip) and np.array_equal(f, flat - offsets[want_clip])
    s.record(np.array([0, 2]), np.array([5, 6]), np.array([True, True]))  # no statistics kept
    assert not s.fail_ema.any() and not s.step_failures.any()


@pytest.mark.parametrize(("key", "value"), [
    ("adaptive_ema", 0.0), ("adaptive_ema", 1.5), ("adaptive_uniform_count", 0.0),
    ("adaptive_kernel_size", 0), ("adaptive_kernel_size", 1.5), ("adaptive_kernel_decay", 0.0),
])
def test_config_rejects_bad_adaptive_values(key, value):
    with pytest.raises(ValueError, match=f"task.reset.{key}"):
        task_config("g1_motion_tracking", {"reset": {key: value}})
