"""Motion library: validation, joint mapping, resampling, FK references, batched lookup."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from reference_helpers import quat_error_angle  # tests/ is on the path (pytest's rootdir)

from unilab.motion_io.clip import MotionFileError, resample_indices
from unilab.sim.quat import quat_mul, quat_normalize, quat_slerp
from unilab.tasks.g1_motion_tracking.motion import MotionLibrary

TINY_XML = """
<mujoco model="tiny">
  <worldbody>
    <body name="base" pos="0 0 1">
      <freejoint name="root"/>
      <geom type="box" size="0.1 0.1 0.1" mass="1"/>
      <body name="upper" pos="0 0 0.2">
        <joint name="j_a" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="0.5"/>
        <body name="tip" pos="0.3 0 0">
          <joint name="j_b" type="hinge" axis="0 0 1"/>
          <geom type="sphere" size="0.05" mass="0.2"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""
JOINTS = ["j_a", "j_b"]


@pytest.fixture(scope="module")
def tiny_model():
    return mujoco.MjModel.from_xml_string(TINY_XML)


def make_clip(T=40, fps=50, names=JOINTS, seed=0, drop=None, **override):
    """A smooth synthetic clip in the BeyondMimic layout."""
    rng = np.random.default_rng(seed)
    t = np.arange(T) / fps
    nj = len(names)
    jp = np.zeros((T, 7 + nj))
    jp[:, 0] = 0.3 * t
    jp[:, 1] = 0.1 * np.sin(2 * t)
    jp[:, 2] = 1.0 + 0.05 * np.cos(3 * t)
    yaw = 0.8 * t + rng.uniform(-0.1, 0.1)
    roll = 0.2 * np.sin(t)
    q = np.stack([np.cos(yaw / 2) * np.cos(roll / 2), np.sin(roll / 2) * np.cos(yaw / 2),
                  np.sin(roll / 2) * np.sin(yaw / 2), np.sin(yaw / 2) * np.cos(roll / 2)], axis=1)
    jp[:, 3:7] = quat_normalize(q)
    for j in range(nj):
        jp[:, 7 + j] = 0.5 * np.sin((j + 1) * t + j)
    vel = np.zeros((T, 6 + nj))
    vel[:, 0:3] = np.gradient(jp[:, 0:3], 1 / fps, axis=0)
    vel[:, 6:] = np.gradient(jp[:, 7:], 1 / fps, axis=0)
    # world-frame angular velocity of the root: w = 2 dq/dt q^-1
    dq = np.gradient(jp[:, 3:7], 1 / fps, axis=0)
    vel[:, 3:6] = 2 * quat_mul(dq, jp[:, 3:7] * np.array([1, -1, -1, -1]))[:, 1:]
    data = dict(fps=np.array([fps]), joint_pos=jp, joint_vel=vel, joint_names=np.array(names))
    data.update(override)
    if drop:
        data.pop(drop)
    return data


def save(tmp_path, name, data):
    path = tmp_path / name
    np.savez(path, **data)
    return path


def test_identity_rate_reproduces_clip(tiny_model, tmp_path):
    data = make_clip()
    path = save(tmp_path, "a.npz", data)
    lib = MotionLibrary(tiny_model, [path], 0.02, ["base", "tip"], anchor_body="base")
    assert lib.num_clips == 1 and lib.num_frames.tolist() == [40]
    np.testing.assert_allclose(lib.qpos[:, :7], data["joint_pos"][:, :7], atol=1e-12)
    np.testing.assert_allclose(lib.joint_pos, data["joint_pos"][:, 7:], atol=1e-12)
    # base body = root: FK pose equals the root pose
    np.testing.assert_allclose(lib.body_pos_w[:, 0], data["joint_pos"][:, :3], atol=1e-12)
    assert quat_error_angle(lib.body_quat_w[:, 0], data["joint_pos"][:, 3:7]).max() < 1e-9


def test_joint_names_reordered_to_model_order(tiny_model, tmp_path):
    data = make_clip()
    swapped = dict(data)
    jp = data["joint_pos"].copy()
    jp[:, 7:] = jp[:, [8, 7]]
    jv = data["joint_vel"].copy()
    jv[:, 6:] = jv[:, [7, 6]]
    swapped.update(joint_pos=jp, joint_vel=jv, joint_names=np.array(["j_b", "j_a"]))
    a = MotionLibrary(tiny_model, [save(tmp_path, "a.npz", data)], 0.02, ["tip"], anchor_body="tip")
    b = MotionLibrary(tiny_model, [save(tmp_path, "b.npz", swapped)], 0.02, ["tip"], anchor_body="tip")
    np.testing.assert_allclose(a.qpos, b.qpos)
    np.testing.assert_allclose(a.body_pos_w, b.body_pos_w)


def test_joint_name_mismatch_lists_missing_and_extra(tiny_model, tmp_path):
    path = save(tmp_path, "bad_names.npz", make_clip(names=["j_a", "j_c"]))
    with pytest.raises(MotionFileError) as err:
        MotionLibrary(tiny_model, [path], 0.02, ["tip"], anchor_body="tip")
    msg = str(err.value)
    assert "bad_names.npz" in msg and "'j_b'" in msg and "'j_c'" in msg
    assert "missing" in msg and "not in the model" in msg


@pytest.mark.parametrize(
    "damage, expect",
    [
        ("truncate", "unreadable or truncated"),
        ("garbage", "unreadable or truncated"),
        ("missing_key", "missing key"),
        ("shape", "'joint_pos' must be"),
        ("vel_shape", "'joint_vel' must be"),
        ("nan", "NaN"),
        ("fps", "'fps'"),
        ("fps_tiny", "'fps' must be one number in"),
        ("scaled_angles", "frame .*, j_.: j_. = .* rad is .* rad outside its range .*radians"),
        ("scaled_root", "root position .* over 1000 m"),
        ("scaled_rates", "'joint_vel' reaches"),
        ("absent", "does not exist"),
        ("zero_quat", "root quaternion has zero norm at frame 0"),
        ("directory", "a directory, not an npz clip"),
    ],
)
def test_bad_files_raise_motion_file_error(tiny_model, tmp_path, damage, expect):
    data = make_clip()
    if damage == "missing_key":
        path = save(tmp_path, "c.npz", make_clip(drop="joint_vel"))
    elif damage == "shape":
        path = save(tmp_path, "c.npz", dict(data, joint_pos=data["joint_pos"][:, :8]))
    elif damage == "vel_shape":
        path = save(tmp_path, "c.npz", dict(data, joint_vel=data["joint_vel"][:-1]))
    elif damage == "nan":
        jp = data["joint_pos"].copy()
        jp[5, 8] = np.nan
        path = save(tmp_path, "c.npz", dict(data, joint_pos=jp))
    elif damage == "fps":
        path = save(tmp_path, "c.npz", dict(data, fps=np.array([0])))
    elif damage == "fps_tiny":  # would resample to 118 TiB of frames
        path = save(tmp_path, "c.npz", dict(data, fps=np.array([1e-9])))
    elif damage in ("scaled_angles", "scaled_root"):  # the same clip in micro-units
        jp = data["joint_pos"].copy()
        jp[:, 7:] *= 1e6 if damage == "scaled_angles" else 1
        jp[:, :3] *= 1e6 if damage == "scaled_root" else 1
        path = save(tmp_path, "c.npz", dict(data, joint_pos=jp))
    elif damage == "scaled_rates":
        path = save(tmp_path, "c.npz", dict(data, joint_vel=data["joint_vel"] * 1e6))
    elif damage == "absent":
        path = tmp_path / "c.npz"
    elif damage == "zero_quat":  # every frame: nothing to normalise
        jp = data["joint_pos"].copy()
        jp[:, 3:7] = 0.0
        path = save(tmp_path, "c.npz", dict(data, joint_pos=jp))
    elif damage == "directory":
        path = tmp_path / "c.npz"
        path.mkdir()
    else:
        path = save(tmp_path, "c.npz", data)
        raw = path.read_bytes()
        path.write_bytes(raw[: len(raw) // 2] if damage == "truncate" else b"\x00" * 64)
    with pytest.raises(MotionFileError, match=expect) as err:
        MotionLibrary(tiny_model, [path], 0.02, ["tip"], anchor_body="tip")
    assert "c.npz" in str(err.value)


def test_resample_to_faster_rate_interpolates(tiny_model, tmp_path):
    data = make_clip(T=41)
    path = save(tmp_path, "a.npz", data)
    coarse = MotionLibrary(tiny_model, [path], 0.02, ["base", "tip"], anchor_body="base")
    fine = MotionLibrary(tiny_model, [path], 0.005, ["base", "tip"], anchor_body="base")
    assert fine.num_frames[0] == 4 * 40 + 1
    # every 4th fine frame is an original frame
    np.testing.assert_allclose(fine.qpos[::4], coarse.qpos, atol=1e-12)
    np.testing.assert_allclose(fine.body_pos_w[::4], coarse.body_pos_w, atol=1e-12)
    # in between: positions lerped, root quaternion slerped
    jp = data["joint_pos"]
    k = 4 * 7 + 1  # a quarter of the way from source frame 7 to 8
    np.testing.assert_allclose(fine.qpos[k, :3], 0.75 * jp[7, :3] + 0.25 * jp[8, :3], atol=1e-12)
    np.testing.assert_allclose(fine.qpos[k, 7:], 0.75 * jp[7, 7:] + 0.25 * jp[8, 7:], atol=1e-12)
    expect_q = quat_slerp(jp[7, 3:7], jp[8, 3:7], np.array(0.25))
    assert quat_error_angle(fine.qpos[k, 3:7], expect_q) < 1e-9
    # slower rate: 41 frames at 50 fps = 0.8 s -> every 0.03 s gives 27 frames
    slow = MotionLibrary(tiny_model, [path], 0.03, ["tip"], anchor_body="tip")
    assert slow.num_frames[0] == 27
    i0, i1, a = resample_indices(41, 50.0, 0.03)
    assert i1.max() <= 40 and (a >= 0).all() and (a < 1).all()


def test_reference_velocities_match_finite_differences(tiny_model, tmp_path):
    lib = MotionLibrary(tiny_model, [save(tmp_path, "a.npz", make_clip(T=200))], 0.005,
                        ["base", "upper", "tip"], anchor_body="base")
    dt = lib.control_dt
    fd = (lib.body_pos_w[2:] - lib.body_pos_w[:-2]) / (2 * dt)
    np.testing.assert_allclose(lib.body_lin_vel_w[1:-1], fd, atol=2e-2)
    # angular: world-frame w ~ 2 * d(q) * q^-1 via finite differences
    q = lib.body_quat_w
    dq = (q[2:] - q[:-2]) / (2 * dt)
    qc = q[1:-1] * np.array([1, -1, -1, -1])
    w = 2 * quat_mul(dq, qc)[..., 1:]
    np.testing.assert_allclose(lib.body_ang_vel_w[1:-1], w, atol=2e-2)


def test_batched_lookup_equals_per_item(tiny_model, tmp_path):
    paths = [save(tmp_path, f"c{i}.npz", make_clip(T=20 + 7 * i, seed=i)) for i in range(3)]
    lib = MotionLibrary(tiny_model, paths, 0.02, ["base", "tip"], anchor_body="tip")
    assert lib.num_clips == 3 and lib.num_frames.tolist() == [20, 27, 34]
    rng = np.random.default_rng(1)
    clips = rng.integers(0, 3, size=64)
    frames = rng.integers(-3, 40, size=64)  # out-of-range frames clamp into the clip
    batch = lib.lookup(clips, frames)
    for i in range(64):
        one = lib.lookup(clips[i : i + 1], frames[i : i + 1])
        for field in ("qpos", "qvel", "joint_pos", "joint_vel", "body_pos_w", "body_quat_w",
                      "body_lin_vel_w", "body_ang_vel_w"):
            np.testing.assert_array_equal(getattr(batch, field)[i], getattr(one, field)[0])
        f = int(np.clip(frames[i], 0, lib.num_frames[clips[i]] - 1))
        np.testing.assert_array_equal(one.qpos[0], lib.qpos[lib.clip_offsets[clips[i]] + f])
    assert batch.body_pos_w.shape == (64, 2, 3) and batch.qvel.shape == (64, tiny_model.nv)


def test_bad_arguments(tiny_model, tmp_path):
    path = save(tmp_path, "a.npz", make_clip())
    with pytest.raises(ValueError, match="not in the model"):
        MotionLibrary(tiny_model, [path], 0.02, ["nope"], anchor_body="nope")
    with pytest.raises(ValueError, match="anchor_body"):
        MotionLibrary(tiny_model, [path], 0.02, ["tip"], anchor_body="base")
    with pytest.raises(ValueError, match="at least one"):
        MotionLibrary(tiny_model, [], 0.02, ["tip"], anchor_body="tip")


@pytest.mark.g1
def test_g1_fk_matches_npz_body_poses():
    """Our FK vs the clip's own body poses, for bodies both robots share.

    Measured: pelvis and legs agree to ~1e-15 m; the upper body differs by a
    constant <= 1.03 cm because the recording model's waist_roll_link sits 9 mm
    from ours; orientations agree to ~1e-7 rad (float32 storage).
    """
    from unilab.assets import g1

    model = g1.load_model()
    names = [model.body(i).name for i in range(1, model.nbody)]
    for path in g1.motion_paths(include_terrain_clips=True):
        with np.load(path) as npz:
            npz_names = [str(n) for n in npz["body_names"]]
            ref_pos, ref_quat = npz["body_pos_w"], npz["body_quat_w"]
        shared = [n for n in names if n in npz_names]
        assert len(shared) >= 25
        lib = MotionLibrary(model, [path], 0.02, shared, anchor_body="torso_link")
        cols = [npz_names.index(n) for n in shared]
        pos_err = np.linalg.norm(lib.body_pos_w - ref_pos[:, cols], axis=-1)
        ang_err = quat_error_angle(lib.body_quat_w, ref_quat[:, cols])
        lower = [i for i, n in enumerate(shared) if n == "pelvis" or "hip" in n or "knee" in n or "ankle" in n]
        assert pos_err[:, lower].max() < 1e-6
        assert pos_err.max() < 0.015
        assert ang_err.max() < 1e-5
