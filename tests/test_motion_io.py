"""Clips in and out (unilab.motion_io, ``unilab-assets import-clip`` / ``export-clip``): round trips through npz,
CSV and ONNX against an analytic motion (exact, or within the interpolation / finite-difference error bounded from its
derivatives), velocities against BeyondMimic's formula, each bad input refused in one line naming the file, row and
column (exit 2), and the published holosoma dance clip on the G1."""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from unilab.assets import cli
from unilab.assets.builtin import humanoid_xml_path
from unilab.motion_io.clip import JOINT_RANGE_SLACK, Clip, model_joint_layout
from unilab.motion_io.convert import FORMATS, convert, read_clip, write_clip
from unilab.motion_io.kinematics import body_state, finite_difference_velocities, with_velocities
from unilab.motion_io.npz_format import isaaclab_joint_order
from unilab.motion_io.onnx_tables import CLIP_OUTPUTS, DOF_NAMES_KEY, embedded_clip
from unilab.sim.quat import quat_conj, quat_mul
from unilab.tasks.g1_motion_tracking.motion import MotionLibrary

FMT = {f.name: f for f in FORMATS}
AXIS = np.array([0.2, -0.1, 1.0]) / np.linalg.norm([0.2, -0.1, 1.0])  # the root turns about this fixed axis
H50, H30 = 1 / 50, 1 / 30


class Motion:
    """An analytic motion on a model, with bounds of its derivatives.

    Root position (0.3 t, 0.1 sin 2t, 0.9 + 0.05 cos 3t); root rotation theta(t) = 0.8 t + 0.3 sin 2t about
    :data:`AXIS` (a fixed axis: slerp is then linear in theta, and the rotation difference is exact, so the position
    bounds apply to the angle too); joint j at mid_j + a_j sin(w_j t + j), inside its range.
    """

    def __init__(self, model):
        self.names, _, _ = model_joint_layout(model)
        lo, hi = np.asarray(model.jnt_range)[[model.joint(n).id for n in self.names]].T
        self.mid, self.amp = (lo + hi) / 2, 0.3 * (hi - lo) / 2
        self.w = np.linspace(1.0, 3.0, len(self.names))
        self.phase = np.arange(len(self.names), dtype=float)
        # max |f''| and |f'''| over every component (root position, theta, joints)
        self.m2 = max(0.4, 0.45, 1.2, *(self.amp * self.w**2))
        self.m3 = max(0.8, 1.35, 2.4, *(self.amp * self.w**3))

    def theta(self, t):
        return 0.8 * t + 0.3 * np.sin(2 * t), 0.8 + 0.6 * np.cos(2 * t)

    def joint_pos(self, t):
        t = np.asarray(t, dtype=float)
        th, _ = self.theta(t)
        quat = np.concatenate([np.cos(th / 2)[:, None], np.sin(th / 2)[:, None] * AXIS], axis=1)
        pos = np.stack([0.3 * t, 0.1 * np.sin(2 * t), 0.9 + 0.05 * np.cos(3 * t)], axis=1)
        return np.concatenate([pos, quat, self.mid + self.amp * np.sin(np.outer(t, self.w) + self.phase)], axis=1)

    def joint_vel(self, t):
        t = np.asarray(t, dtype=float)
        _, dth = self.theta(t)
        lin = np.stack([np.full_like(t, 0.3), 0.2 * np.cos(2 * t), -0.15 * np.sin(3 * t)], axis=1)
        joints = self.amp * self.w * np.cos(np.outer(t, self.w) + self.phase)
        return np.concatenate([lin, dth[:, None] * AXIS, joints], axis=1)

    def clip(self, frames=80, fps=50.0):
        t = np.arange(frames) / fps
        return Clip(fps, tuple(self.names), self.joint_pos(t), self.joint_vel(t))

    def fd_bound(self, frames, h):
        """Bound of a finite-difference velocity's error per frame: h^2/6 M3 inside (central differences), at the
        two ends h M2 + h^2/6 M3 (one-sided differences: h/2 M2; the repeated angular value: h M2 + h^2/6 M3)."""
        bound = np.full(frames, h**2 / 6 * self.m3)
        bound[[0, -1]] += h * self.m2
        return bound[:, None]


@pytest.fixture(scope="module")
def model():
    import mujoco

    return mujoco.MjModel.from_xml_path(str(humanoid_xml_path()))


@pytest.fixture(scope="module")
def motion(model):
    return Motion(model)


def angle_between(a, b):
    """Rotation angle (rad) between quaternions, well conditioned near 0 (arccos of the dot product is not)."""
    a = a / np.linalg.norm(a, axis=-1, keepdims=True)
    b = b / np.linalg.norm(b, axis=-1, keepdims=True)
    rel = quat_mul(quat_conj(a), b)
    return 2 * np.arctan2(np.linalg.norm(rel[..., 1:], axis=-1), np.abs(rel[..., 0]))


def assert_pose_close(got, want, atol):
    """joint_pos rows equal to ``atol``: positions and joints by value, the root quaternion by rotation angle."""
    np.testing.assert_allclose(got[:, :3], want[:, :3], atol=atol, rtol=0)
    np.testing.assert_allclose(got[:, 7:], want[:, 7:], atol=atol, rtol=0)
    assert angle_between(got[:, 3:7], want[:, 3:7]).max() <= atol


def write(path, clip, model):
    """``clip`` written to ``path`` (format from the suffix; ONNX: the humanoid's torso as reference body)."""
    write_clip(path, clip, model, FMT[path.suffix[1:]], "torso")
    return path


def read(path, model, fps=None):
    return read_clip(path, model, FMT[path.suffix[1:]], fps, "torso")


# --- round trips ---------------------------------------------------------------------------------------------------

def test_npz_round_trip_is_exact_and_loads_for_training(tmp_path, model, motion):
    clip = motion.clip()
    back = read(write(tmp_path / "a.npz", clip, model), model)
    assert back.fps == clip.fps and back.joint_names == clip.joint_names
    np.testing.assert_allclose(back.joint_pos, clip.joint_pos, atol=1e-15, rtol=0)  # quaternions renormalised
    np.testing.assert_array_equal(back.joint_vel, clip.joint_vel)
    # holosoma's body arrays are our model's forward kinematics: what the motion library computes from the clip
    lib = MotionLibrary(model, [tmp_path / "a.npz"], 1 / clip.fps, ["pelvis", "torso", "left_foot"],
                        anchor_body="torso")
    with np.load(tmp_path / "a.npz") as npz:
        names = list(npz["body_names"])
        idx = [names.index(b) for b in ("pelvis", "torso", "left_foot")]
        np.testing.assert_allclose(npz["body_pos_w"][:, idx], lib.body_pos_w, atol=1e-6)
        np.testing.assert_allclose(npz["body_quat_w"][:, idx], lib.body_quat_w, atol=1e-6)
        np.testing.assert_allclose(npz["body_ang_vel_w"][:, idx], lib.body_ang_vel_w, atol=1e-5)


def test_csv_round_trip_at_the_clip_rate(tmp_path, model, motion):
    clip = motion.clip()
    back = read(write(tmp_path / "a.csv", clip, model), model, fps=50)
    assert back.joint_vel is None and back.num_frames == clip.num_frames
    assert_pose_close(back.joint_pos, clip.joint_pos, 1e-6)
    vel = with_velocities(back).joint_vel
    # the velocities are the finite differences of the positions, within their truncation error of the true ones
    np.testing.assert_allclose(vel, finite_difference_velocities(clip.joint_pos, 50), atol=1e-6, rtol=0)
    assert (np.abs(vel - clip.joint_vel) <= motion.fd_bound(clip.num_frames, H50) + 1e-6).all()


def test_csv_round_trip_through_30_fps_is_within_the_interpolation_error(tmp_path, model, motion):
    clip = motion.clip(frames=101)  # 2 s at 50 fps
    write(tmp_path / "a.npz", clip, model)
    exported = convert(tmp_path / "a.npz", tmp_path / "a.csv", model)  # the LAFAN1 layout's 30 fps
    back = convert(tmp_path / "a.csv", tmp_path / "b.npz", model)  # read at 30 fps, written at 50
    assert (exported.fps, exported.num_frames, back.fps, back.num_frames) == (30, 61, 50, 101)
    # two linear interpolations of exact samples: each is off by at most h^2/8 max|f''|, and interpolating does not
    # amplify the first one's error
    interp = (H50**2 + H30**2) / 8 * motion.m2
    assert_pose_close(back.joint_pos, clip.joint_pos, interp + 1e-8)
    err = np.abs(back.joint_vel - clip.joint_vel)
    assert (err <= motion.fd_bound(101, H50) + 2 * interp / H50).all()
    # the bound is not loose to the point of meaning nothing: a one-frame time shift would break it
    assert np.abs(clip.joint_pos[1:, 7:] - clip.joint_pos[:-1, 7:]).max() > 10 * interp


def test_onnx_round_trip_and_the_graph_clamps_time_step(tmp_path, model, motion):
    clip = motion.clip()
    path = write(tmp_path / "a.onnx", clip, model)
    back = read(path, model)
    assert back.num_frames == clip.num_frames and back.fps == 50
    assert_pose_close(back.joint_pos, clip.joint_pos, 1e-6)  # float32 tables; the root recovered from the torso
    np.testing.assert_allclose(back.joint_vel[:, 6:], clip.joint_vel[:, 6:], atol=1e-6, rtol=0)
    # root velocities: finite differences of the recovered root (float32 noise / h on top of the truncation error)
    assert (np.abs(back.joint_vel[:, :6] - clip.joint_vel[:, :6])
            <= motion.fd_bound(clip.num_frames, H50) + 2e-7 / H50).all()

    # holosoma_inference's view: the outputs at a time step are the torso pose of that (clamped) frame
    pos, quat, _, _ = body_state(model, clip, np.array([model.body("torso").id]))
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for step, frame in ((-3, 0), (0, 0), (17, 17), (79, 79), (500, 79)):
        out = dict(zip(CLIP_OUTPUTS, sess.run(list(CLIP_OUTPUTS), {"time_step": np.array([[step]], np.float32)}),
                       strict=True))
        assert {k: v.shape for k, v in out.items()} == {"joint_pos": (1, 15), "joint_vel": (1, 15),
                                                        "ref_pos_xyz": (1, 3), "ref_quat_xyzw": (1, 4)}
        np.testing.assert_allclose(out["ref_pos_xyz"][0], pos[frame, 0], atol=1e-6)
        np.testing.assert_allclose(out["ref_quat_xyzw"][0], quat[frame, 0][[1, 2, 3, 0]], atol=1e-6)
        np.testing.assert_allclose(out["joint_pos"][0], clip.joint_pos[frame, 7:], atol=1e-6)
    meta = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    assert json.loads(meta[DOF_NAMES_KEY]) == list(clip.joint_names)


class _HolosomaLikeExporter(torch.nn.Module):
    """A WBT policy exported as holosoma's ``_OnnxMotionPolicyExporter`` does (torch.onnx, opset 13): an actor on
    ``obs`` and the clip as tensors indexed by ``clamp(time_step.long().squeeze(-1), max=T-1)``."""

    def __init__(self, joint_pos, joint_vel, ref_pos, ref_quat_xyzw):
        super().__init__()
        self.actor = torch.nn.Linear(4, joint_pos.shape[1])
        self.tables = [torch.tensor(a, dtype=torch.float32) for a in (joint_pos, joint_vel, ref_pos, ref_quat_xyzw)]

    def forward(self, obs, time_step):
        i = torch.clamp(time_step.long().squeeze(-1), max=self.tables[0].shape[0] - 1)
        return (self.actor(obs), *(t[i] for t in self.tables))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch's TorchScript exporter, the one holosoma uses
def test_reads_a_policy_file_as_holosoma_exports_it(tmp_path, model, motion):
    clip = motion.clip(frames=30)
    pos, quat, _, _ = body_state(model, clip, np.array([model.body("torso").id]))
    order = np.random.default_rng(0).permutation(len(clip.joint_names))  # a file's own joint order
    exporter = _HolosomaLikeExporter(clip.joint_pos[:, 7:][:, order], clip.joint_vel[:, 6:][:, order], pos[:, 0],
                                     quat[:, 0][:, [1, 2, 3, 0]])
    path = tmp_path / "policy.onnx"
    torch.onnx.export(exporter, (torch.zeros(1, 4), torch.zeros(1, 1)), str(path), opset_version=13, dynamo=False,
                      input_names=["obs", "time_step"], output_names=["actions", *CLIP_OUTPUTS])
    m = onnx.load(str(path))
    onnx.helper.set_model_props(m, {DOF_NAMES_KEY: json.dumps([clip.joint_names[i] for i in order])})
    onnx.save(m, str(path))
    assert embedded_clip(path).num_frames == 30
    back = read(path, model)
    assert_pose_close(back.joint_pos, clip.joint_pos, 1e-6)
    np.testing.assert_allclose(back.joint_vel[:, 6:], clip.joint_vel[:, 6:], atol=1e-6, rtol=0)


def test_beyondmimic_unnamed_npz(tmp_path, model, motion):
    clip = motion.clip()
    order = [clip.joint_names.index(n) for n in isaaclab_joint_order(model)]
    assert order != sorted(order)  # the layouts differ, so a wrong mapping shows
    body_pos = np.stack([clip.joint_pos[:, :3], np.ones((clip.num_frames, 3))], axis=1)
    body_quat = np.stack([clip.joint_pos[:, 3:7], np.tile([1.0, 0, 0, 0], (clip.num_frames, 1))], axis=1)
    np.savez(tmp_path / "bm.npz", fps=np.array([50]), joint_pos=clip.joint_pos[:, 7:][:, order],
             joint_vel=clip.joint_vel[:, 6:][:, order], body_pos_w=body_pos, body_quat_w=body_quat)
    back = read(tmp_path / "bm.npz", model)
    np.testing.assert_allclose(back.joint_pos, clip.joint_pos, atol=1e-15, rtol=0)
    np.testing.assert_array_equal(back.joint_vel[:, 6:], clip.joint_vel[:, 6:])
    assert (np.abs(back.joint_vel[:, :6] - clip.joint_vel[:, :6]) <= motion.fd_bound(80, H50)).all()


# --- velocities: BeyondMimic's csv_to_npz formulas --------------------------------------------------------------------

def _beyondmimic_velocities(joint_pos: np.ndarray, fps: float) -> np.ndarray:
    """whole_body_tracking/scripts/csv_to_npz.py, ``_compute_velocities``: torch.gradient of positions and joints;
    ``_so3_derivative``: axis_angle(q[k+1] * conj(q[k-1])) / (2 dt), the first and last values repeated (IsaacLab's
    ``axis_angle_from_quat``: w made >= 0, angle 2 atan2(|v|, w), v * angle / sin(angle / 2))."""
    x = torch.tensor(joint_pos)
    dt = 1.0 / fps
    lin = torch.gradient(x[:, :3], spacing=dt, dim=0)[0]
    dof = torch.gradient(x[:, 7:], spacing=dt, dim=0)[0]
    q = x[:, 3:7]
    a, b = q[2:], q[:-2] * torch.tensor([1.0, -1.0, -1.0, -1.0], dtype=q.dtype)
    rel = torch.stack([a[:, 0] * b[:, 0] - (a[:, 1:] * b[:, 1:]).sum(1),
                       *(a[:, 0:1] * b[:, 1:] + b[:, 0:1] * a[:, 1:] + torch.linalg.cross(a[:, 1:], b[:, 1:])).T],
                      dim=1)
    rel = rel * (1.0 - 2.0 * (rel[:, 0:1] < 0.0))
    mag = torch.linalg.norm(rel[:, 1:], dim=-1)
    angle = 2.0 * torch.atan2(mag, rel[:, 0])
    omega = rel[:, 1:] / (torch.sin(angle / 2) / angle).unsqueeze(-1) / (2.0 * dt)
    omega = torch.cat([omega[:1], omega, omega[-1:]])
    return torch.cat([lin, omega, dof], dim=1).numpy()


def test_finite_differences_are_beyondmimic_s(motion):
    clip = motion.clip(frames=40)
    quat = clip.joint_pos[:, 3:7].copy()
    quat[1::3] *= -1.0  # a stored sign flip must not matter
    jp = np.concatenate([clip.joint_pos[:, :3], quat, clip.joint_pos[:, 7:]], axis=1)
    np.testing.assert_allclose(finite_difference_velocities(jp, 50.0), _beyondmimic_velocities(jp, 50.0),
                               atol=1e-12, rtol=0)


# --- bad input: one line naming the file, row and column, exit 2 --------------------------------------------------

def _csv_rows(motion, frames=6):
    clip = motion.clip(frames=frames)
    jp = clip.joint_pos
    return np.concatenate([jp[:, :3], jp[:, [4, 5, 6, 3]], jp[:, 7:]], axis=1)


def _run(argv, capsys):
    """Exit code and stderr lines of ``unilab-assets ARGV``."""
    rc = cli.main(argv)
    return rc, capsys.readouterr().err.strip().splitlines()


def _import(src, tmp_path, capsys, *extra):
    return _run(["import-clip", str(src), "--out", str(tmp_path / "out.npz"), "--model", str(humanoid_xml_path()),
                 "--ref-body", "torso", "--quiet", *extra], capsys)


def _write_csv(path, rows, cells=None):
    lines = [",".join(repr(float(v)) for v in row) for row in rows]
    for (r, c), text in (cells or {}).items():
        parts = lines[r].split(",")
        parts[c] = text
        lines[r] = ",".join(parts)
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("case, expect", [
    ("columns", "row 3 has 21 columns, expected 22"),
    ("text", "row 2, column 9 (left_shoulder_pitch): 'abc' is not a number"),
    ("nan", "row 4, column 2 (root y): nan is not a finite number"),
    ("quaternion", "row 5, columns 4-7 (root quaternion x, y, z, w): quaternion"),
    ("joint_limit", "row 2, column 17 (left_knee): left_knee = 5 rad is"),
    ("root_far", "row 1, column 3 (root z): root position 5000 is over 1000 m"),
    ("fps", "--fps: frame rate 0.0 is not a number in [1, 10000] fps"),
])
def test_bad_csv_is_one_line_naming_file_row_and_column(case, expect, tmp_path, model, motion, capsys):
    rows = _csv_rows(motion)
    cells, extra = {}, []
    if case == "columns":
        rows = [list(r) for r in rows]
        rows[2] = rows[2][:-1]
    elif case == "text":
        cells = {(1, 8): "abc"}
    elif case == "nan":
        rows[3, 1] = np.nan
    elif case == "quaternion":
        rows[4, 3:7] *= 1.3
    elif case == "joint_limit":
        rows[1, 7 + motion.names.index("left_knee")] = 5.0  # range [0, 2.44]: 2.56 rad past it
    elif case == "root_far":
        rows[0, 2] = 5000.0
    elif case == "fps":
        extra = ["--fps", "0"]
    src = _write_csv(tmp_path / "clip.csv", rows, cells)
    rc, err = _import(src, tmp_path, capsys, *extra)
    assert rc == 2 and len(err) == 1, err
    assert expect in err[0] and (case == "fps" or str(src) in err[0]), err
    assert not (tmp_path / "out.npz").exists()


def test_csv_header_and_blank_lines_keep_row_numbers(tmp_path, model, motion, capsys):
    rows = _csv_rows(motion)
    rows[3, 1] = np.nan
    text = ",".join(f"c{i}" for i in range(22)) + "\n"
    text += "\n".join(",".join(repr(float(v)) for v in r) + ("\n" if i == 1 else "") for i, r in enumerate(rows))
    (tmp_path / "h.csv").write_text(text + "\n")
    rc, err = _import(tmp_path / "h.csv", tmp_path, capsys)
    # line 1 header, frames on lines 2, 3, (blank 4), 5, 6...: frame 3 is line 6
    assert rc == 2 and "row 6, column 2 (root y)" in err[0], err


def test_joint_within_the_slack_is_accepted(tmp_path, model, motion, capsys):
    rows = _csv_rows(motion)
    knee = 7 + motion.names.index("left_knee")
    rows[:, knee] = model.jnt_range[model.joint("left_knee").id][1] + 0.9 * JOINT_RANGE_SLACK
    rc, err = _import(_write_csv(tmp_path / "ok.csv", rows), tmp_path, capsys)
    assert rc == 0, err
    with np.load(tmp_path / "out.npz") as npz:
        assert npz["joint_pos"].shape == (9, 22) and float(npz["fps"][0]) == 50.0  # 6 frames at 30 fps -> 50 fps


def _npz(tmp_path, motion, **change):
    clip = motion.clip(frames=10)
    data = dict(fps=np.array([50.0]), joint_pos=clip.joint_pos.copy(), joint_vel=clip.joint_vel.copy(),
                joint_names=np.array(clip.joint_names))
    data.update(change)
    data = {k: v for k, v in data.items() if v is not None}
    np.savez(tmp_path / "clip.npz", **data)
    return tmp_path / "clip.npz"


@pytest.mark.parametrize("case, expect", [
    ("no_fps", "the frame rate is unknown: the file has no 'fps'; give it with --fps"),
    ("fps_range", "'fps': frame rate 0.0 is not a number in [1, 10000] fps"),
    ("nan", "frame 6, joint_pos[:, 9] (left_shoulder_roll): nan is not a finite number"),
    ("quaternion", "frame 2, joint_pos[:, 3:7] (root quaternion w, x, y, z): quaternion"),
    ("joint_limit", "frame 0, joint_pos[:, 7] (waist_yaw): waist_yaw = -3 rad is"),
    ("columns", "'joint_pos' must be (T, 22), got (10, 21)"),
    ("names", "the joint names do not match the model's joints; model joints missing: ['right_ankle']"),
])
def test_bad_npz_is_one_line_naming_file_frame_and_column(case, expect, tmp_path, motion, capsys):
    clip = motion.clip(frames=10)
    jp = clip.joint_pos.copy()
    change = {}
    if case == "no_fps":
        change = {"fps": None}
    elif case == "fps_range":
        change = {"fps": np.array([0.0])}
    elif case == "nan":
        jp[6, 9] = np.nan
    elif case == "quaternion":
        jp[2, 3:7] = [0.5, 0.0, 0.0, 0.0]
    elif case == "joint_limit":
        jp[0, 7] = -3.0
    elif case == "columns":
        jp = jp[:, :-1]
    elif case == "names":
        change = {"joint_names": np.array([*clip.joint_names[:-1], "tail"])}
    src = _npz(tmp_path, motion, joint_pos=jp, **change)
    rc, err = _import(src, tmp_path, capsys)
    assert rc == 2 and len(err) == 1 and str(src) in err[0] and expect in err[0], err


def test_npz_without_fps_imports_with_the_flag(tmp_path, motion, capsys):
    rc, err = _import(_npz(tmp_path, motion, fps=None), tmp_path, capsys, "--fps", "25")
    assert rc == 0, err
    with np.load(tmp_path / "out.npz") as npz:
        assert float(npz["fps"][0]) == 50.0 and npz["joint_pos"].shape[0] == 19  # 9 intervals at 25 -> 18 at 50


@pytest.mark.parametrize("case, expect", [
    ("nan", "time_step 4, ref_pos_xyz[2]: nan is not a finite number"),
    ("quaternion", "time_step 7, ref_quat_xyzw: quaternion"),
    ("joint_limit", "time_step 1, joint_pos[8] (left_hip_pitch): left_hip_pitch = 4 rad is"),
    ("not_a_clip", "output 'joint_pos' is not a Gather (axis 0) of a constant table"),
])
def test_bad_onnx_is_one_line_naming_file_time_step_and_column(case, expect, tmp_path, model, motion, capsys):
    from unilab.motion_io import onnx_tables

    clip = motion.clip(frames=10)
    path = write(tmp_path / "a.onnx", clip, model)
    tables = embedded_clip(path)
    arrays = {name: getattr(tables, name).copy() for name in CLIP_OUTPUTS}
    if case == "nan":
        arrays["ref_pos_xyz"][4, 2] = np.nan
    elif case == "quaternion":
        arrays["ref_quat_xyzw"][7] *= 0.5
    elif case == "joint_limit":
        arrays["joint_pos"][1, 8] = 4.0
    onnx_tables.write_clip_model(path, onnx_tables.ClipTables(**arrays, dof_names=tables.dof_names))
    if case == "not_a_clip":
        m = onnx.load(str(path))
        for node in m.graph.node:
            if node.output[0] == "joint_pos":
                node.op_type, node.input[:] = "Identity", [node.input[1]]
                del node.attribute[:]
        onnx.save(m, str(path))
    rc, err = _import(path, tmp_path, capsys)
    assert rc == 2 and len(err) == 1 and str(path) in err[0] and expect in err[0], err


def test_cli_refuses_bad_targets_before_reading(tmp_path, motion, capsys):
    src = _npz(tmp_path, motion)
    (tmp_path / "out.npz").write_bytes(b"keep")
    rc, err = _import(src, tmp_path, capsys)
    assert rc == 2 and "exists; pass --force" in err[0] and (tmp_path / "out.npz").read_bytes() == b"keep"
    rc, err = _run(["import-clip", str(src), "--out", str(tmp_path / "x.csv"), "--quiet"], capsys)
    assert rc == 2 and "import-clip writes our npz format; export-clip writes .csv" in err[0]
    rc, err = _run(["import-clip", str(src), "--out", str(tmp_path / "nowhere" / "x.npz"), "--quiet"], capsys)
    assert rc == 2 and "does not exist" in err[0]
    rc, err = _run(["import-clip", str(tmp_path / "missing.npz"), "--out", str(tmp_path / "y.npz")], capsys)
    assert rc == 2 and "missing.npz: file does not exist" in err[0]
    rc, err = _run(["export-clip", str(src), "--out", str(tmp_path / "y.txt")], capsys)
    assert rc == 2 and "unknown clip format '.txt'" in err[0]
    rc, err = _run(["export-clip", str(src), "--out", str(tmp_path / "z.onnx"), "--model", str(humanoid_xml_path()),
                    "--ref-body", "nose"], capsys)
    assert rc == 2 and "--ref-body 'nose' is not a body of the model" in err[0]


def test_cli_export_import_and_progress(tmp_path, model, motion, capsys):
    src = write(tmp_path / "a.npz", motion.clip(), model)
    rc = cli.main(["export-clip", str(src), "--out", str(tmp_path / "a.onnx"), "--model", str(humanoid_xml_path()),
                   "--ref-body", "torso"])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert rc == 0 and out.strip() == f"{tmp_path / 'a.onnx'}: 80 frames at 50 fps, 15 joints"
    assert lines[0].startswith("unilab-assets: reading") and lines[-1].startswith("unilab-assets: done in")
    rc, err = _run(["import-clip", str(tmp_path / "a.onnx"), "--out", str(tmp_path / "b.npz"), "--model",
                    str(humanoid_xml_path()), "--ref-body", "torso", "--quiet"], capsys)
    assert rc == 0 and err == []
    with np.load(tmp_path / "b.npz") as b, np.load(src) as a:
        assert_pose_close(b["joint_pos"], a["joint_pos"], 1e-6)


def test_help_explains_every_flag():
    for command in ("import-clip", "export-clip"):
        parser = cli._build_parser()._subparsers._group_actions[0].choices[command]
        for action in parser._actions:
            assert action.help and len(action.help) > 10, (command, action.dest)


# --- the published dance clip (G1) -----------------------------------------------------------------------------------

DANCE = "fastsac_g1_29dof_dancing"
INFERENCE_WHEEL = "holosoma_inference-0.1.3-py3-none-any.whl"
INFERENCE_SHA256 = "3c11fd4595bc82921d4c44f77357667828761548c1ce74782ea77937b2ab0ef7"
BEYONDMIMIC_G1_JOINTS = [  # whole_body_tracking's G1 (IsaacLab articulation order)
    "left_hip_pitch_joint", "right_hip_pitch_joint", "waist_yaw_joint", "left_hip_roll_joint", "right_hip_roll_joint",
    "waist_roll_joint", "left_hip_yaw_joint", "right_hip_yaw_joint", "waist_pitch_joint", "left_knee_joint",
    "right_knee_joint", "left_shoulder_pitch_joint", "right_shoulder_pitch_joint", "left_ankle_pitch_joint",
    "right_ankle_pitch_joint", "left_shoulder_roll_joint", "right_shoulder_roll_joint", "left_ankle_roll_joint",
    "right_ankle_roll_joint", "left_shoulder_yaw_joint", "right_shoulder_yaw_joint", "left_elbow_joint",
    "right_elbow_joint", "left_wrist_roll_joint", "right_wrist_roll_joint", "left_wrist_pitch_joint",
    "right_wrist_pitch_joint", "left_wrist_yaw_joint", "right_wrist_yaw_joint"]


def _published_dance(tmp_path: Path) -> Path:
    """The published FastSAC dance file: through unilab's cached fetch of holosoma_inference's policies where this
    version has one, else from the wheel in $UNILAB_HOLOSOMA_INFERENCE_WHEEL or <cache>/downloads/ (sha256-checked);
    skipped with the download instruction otherwise."""
    try:
        from unilab.assets import holosoma_inference  # the cached, pinned fetch (where it exists)
    except ImportError:
        holosoma_inference = None
    if holosoma_inference is not None and hasattr(holosoma_inference, "published_policy"):
        from unilab.assets.holosoma import AssetError

        try:
            return holosoma_inference.published_policy(DANCE, progress=False)
        except AssetError as exc:
            pytest.skip(str(exc))
    from unilab.cache import cache_dir

    wheel = Path(os.environ.get("UNILAB_HOLOSOMA_INFERENCE_WHEEL") or cache_dir() / "downloads" / INFERENCE_WHEEL)
    if not wheel.is_file() or hashlib.sha256(wheel.read_bytes()).hexdigest() != INFERENCE_SHA256:
        pytest.skip(f"needs {INFERENCE_WHEEL} (sha256 {INFERENCE_SHA256}): `python -m pip download --no-deps "
                    f"holosoma-inference==0.1.3 -d {cache_dir() / 'downloads'}`")
    with zipfile.ZipFile(wheel) as zf:
        out = tmp_path / f"{DANCE}.onnx"
        out.write_bytes(zf.read(f"holosoma_inference/models/wbt/{DANCE}.onnx"))
    return out


@pytest.mark.g1
def test_isaaclab_joint_order_of_the_g1_is_beyondmimic_s():
    from unilab.assets import g1

    assert isaaclab_joint_order(g1.load_model()) == BEYONDMIMIC_G1_JOINTS


@pytest.mark.g1
def test_published_dance_imports_with_the_pelvis_under_the_torso(tmp_path, capsys):
    from unilab.assets import g1

    src = _published_dance(tmp_path)
    g1_model = g1.load_model()
    rc, err = _run(["import-clip", str(src), "--out", str(tmp_path / "dance.npz"), "--quiet"], capsys)
    assert rc == 0, err
    tables = embedded_clip(src)
    clip = read_clip(tmp_path / "dance.npz", g1_model, FMT["npz"])
    assert clip.num_frames == tables.num_frames == 6774 and clip.fps == 50
    # the recovered pelvis puts the torso, by forward kinematics on our model, where the file has it
    pos, quat, _, _ = body_state(g1_model, clip, np.array([g1_model.body("torso_link").id]))
    np.testing.assert_allclose(pos[:, 0], tables.ref_pos_xyz, atol=1e-6, rtol=0)
    assert angle_between(quat[:, 0], tables.ref_quat_xyzw[:, [3, 0, 1, 2]]).max() <= 1e-6
    order = [list(tables.dof_names).index(n) for n in clip.joint_names]
    np.testing.assert_array_equal(clip.joint_pos[:, 7:], tables.joint_pos[:, order])
    # frame 0 is holosoma's default standing pose: the pelvis upright over the origin, feet near the floor
    np.testing.assert_allclose(clip.joint_pos[0, :3], [0.0, 0.0, 0.8], atol=0.01)
    assert angle_between(clip.joint_pos[0, 3:7], np.array([1.0, 0, 0, 0])) < 0.01
    MotionLibrary(g1_model, [tmp_path / "dance.npz"], 0.02, ["pelvis", "torso_link"], anchor_body="torso_link")
