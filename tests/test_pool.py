"""Physics pools: every backend of ``BACKENDS`` against the ``PhysicsPool`` interface (the tests taking ``make``:
stepping, resets, body state, determinism, pinning and the bad-env mask), then the MuJoCo pool's own rules."""

from __future__ import annotations

import functools
import inspect

import mujoco
import numpy as np
import pytest
from mujoco import batch as mjbatch
from reference_helpers import thread_affinity  # tests/ is on the path (pytest's rootdir)

from unilab.sim import cpu
from unilab.sim.mujoco.pool import BatchEnvPool
from unilab.sim.physics import BACKENDS, BODY_STATE, CONTACT_FORCE, OutputUnavailable, PhysicsPool, make_pool

N = 16


@pytest.fixture(params=sorted(BACKENDS))
def make(request):
    """``make_pool`` of each backend: a test taking it is part of every backend's conformance test."""
    return functools.partial(make_pool, backend=request.param)


@pytest.fixture(scope="module")
def humanoid_imu():
    """The humanoid with an accelerometer on its torso (MuJoCo then computes the net body forces)."""
    from unilab.assets.builtin import humanoid_xml_path

    spec = mujoco.MjSpec.from_file(str(humanoid_xml_path()))
    site = spec.body("torso").add_site(name="accelerometer_site")
    spec.add_sensor(type=mujoco.mjtSensor.mjSENS_ACCELEROMETER, objtype=mujoco.mjtObj.mjOBJ_SITE, objname=site.name)
    return spec.compile()


def _random_ctrl(model, rng, n=N):
    return rng.uniform(-0.5, 0.5, (n, model.nu))


def _perturbed(pool, rng):
    nq, nv = pool.qpos.shape[1], pool.qvel.shape[1]
    qpos = np.tile(pool.model.qpos0, (pool.num_envs, 1))
    qpos[:, 7:] += rng.normal(0, 0.05, (pool.num_envs, nq - 7))
    qvel = rng.normal(0, 0.1, (pool.num_envs, nv))
    return qpos, qvel


def _state(pool):
    """Every env's joint state and body poses (what a task reads of a pool)."""
    return np.concatenate([pool.qpos, pool.qvel, pool.body_pos_w.reshape(pool.num_envs, -1),
                           pool.body_quat_w.reshape(pool.num_envs, -1)], axis=1)


def _state_rows(pool):
    """A MuJoCo pool's full integration state, ``(num_envs, nstate)``."""
    return np.array(pool._batch.state, copy=True)


def _interface():
    """The members of PhysicsPool: attributes (annotated) and methods, with the methods' parameters."""
    attrs = set(PhysicsPool.__annotations__)
    methods = {name: inspect.signature(getattr(PhysicsPool, name)) for name, v in vars(PhysicsPool).items()
               if not name.startswith("_") and (inspect.isfunction(v) or isinstance(v, staticmethod))}
    props = {name for name, v in vars(PhysicsPool).items() if isinstance(v, property)}
    return attrs, methods, props


def test_the_pool_has_every_member_of_the_interface(make, humanoid):
    pool = make(humanoid, N, nthread=1, outputs=BODY_STATE)
    attrs, methods, props = _interface()
    for name in attrs | props:
        assert hasattr(pool, name), name
    for name, want in methods.items():
        got = inspect.signature(getattr(pool, name))
        params = [p for p in want.parameters if p != "self"]
        assert list(got.parameters)[:len(params)] == params, name  # the interface's parameters, in its order
        extra = list(got.parameters.values())[len(params):]
        assert all(p.default is not p.empty for p in extra), name  # anything more is optional
    assert (pool.qpos.shape, pool.qvel.shape, pool.ctrl.shape) == ((N, humanoid.nq), (N, humanoid.nv),
                                                                   (N, humanoid.nu))
    assert pool.bad_envs.shape == (N,) and pool.bad_envs.dtype == bool and pool.num_envs == N
    for name, width in zip(BODY_STATE, (3, 4, 3, 3)):
        assert getattr(pool, name).shape == (N, humanoid.nbody, width), name
    assert pool.nthread == 1 and pool.cpu_ids is None and isinstance(pool.contacts, bool)
    pool.close()


def test_mujocos_default_outputs_are_its_fields(humanoid):
    pool = BatchEnvPool(humanoid, N, nthread=1)
    assert pool.xpos.shape == (N, humanoid.nbody, 3)
    assert pool.xquat.shape == (N, humanoid.nbody, 4)
    assert pool.cvel.shape == (N, humanoid.nbody, 6)
    assert pool.sensordata.shape == (N, humanoid.nsensordata)
    assert pool.bind("cfrc_ext").shape == (N, humanoid.nbody, 6)


def _object_state(model, qpos, qvel, body):
    """MuJoCo's own answer for one body: world position, quaternion, and (angular, linear) velocity at its origin."""
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:] = qpos, qvel
    mujoco.mj_forward(model, data)
    vel = np.zeros(6)
    # XBODY: at the body frame origin (BODY would be its centre of mass); 0: world-aligned
    mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_XBODY, body, vel, 0)
    return data.xpos[body], data.xquat[body], vel[3:], vel[:3]


@pytest.mark.parametrize("contacts", [True, False])
def test_body_state_is_each_body_origin_in_world_frame(make, humanoid, contacts):
    """The backend-neutral outputs after a step and after a reset of some envs, against mj_objectVelocity."""
    rng = np.random.default_rng(3)
    pool = make(humanoid, N, nthread=2, outputs=BODY_STATE, contacts=contacts)
    pool.step(_random_ctrl(humanoid, rng), substeps=2)
    ids = np.array([1, 3])
    qpos, qvel = _perturbed(pool, rng)
    pool.reset(ids, qpos[ids], qvel[ids])
    for e in range(N):
        for body in range(1, humanoid.nbody):
            pos, quat, lin, ang = _object_state(humanoid, pool.qpos[e], pool.qvel[e], body)
            np.testing.assert_allclose(pool.body_pos_w[e, body], pos, atol=1e-12)
            np.testing.assert_allclose(pool.body_quat_w[e, body], quat, atol=1e-12)
            np.testing.assert_allclose(pool.body_lin_vel_w[e, body], lin, atol=1e-9)
            np.testing.assert_allclose(pool.body_ang_vel_w[e, body], ang, atol=1e-9)


def test_step_moves_every_env_and_derived_fields_are_current(make, humanoid):
    rng = np.random.default_rng(0)
    pool = make(humanoid, N, nthread=2, outputs=BODY_STATE)
    q0 = pool.qpos.copy()
    bad = pool.step(_random_ctrl(humanoid, rng), substeps=3)
    assert not bad.any()
    assert (np.abs(pool.qpos - q0).max(axis=1) > 0).all()
    # body poses match the new qpos exactly
    z_pelvis = pool.body_pos_w[:, humanoid.body("pelvis").id, 2]
    np.testing.assert_allclose(z_pelvis, pool.qpos[:, 2], atol=1e-12)


def test_ctrl_shape_is_checked(make, humanoid):
    pool = make(humanoid, N, nthread=1)
    with pytest.raises(ValueError, match="ctrl has shape"):
        pool.step(np.zeros((N, humanoid.nu + 1)), 1)
    with pytest.raises(ValueError, match="substeps"):
        pool.step(None, 0)


def test_results_are_bit_identical_at_any_thread_count(make, humanoid):
    rows = []
    for n in (1, max(2, cpu.usable_cpu_count())):
        rng = np.random.default_rng(42)
        pool = make(humanoid, N, nthread=n, outputs=BODY_STATE)
        assert pool.nthread == n
        pool.reset(np.arange(N), *_perturbed(pool, rng))
        for _ in range(10):
            pool.step(_random_ctrl(humanoid, rng), 2)
        rows.append(_state(pool))
    assert np.array_equal(rows[0], rows[1])


def test_reset_of_a_subset_leaves_the_others_untouched(make, humanoid):
    rng = np.random.default_rng(1)
    pool = make(humanoid, N, nthread=2, outputs=BODY_STATE)
    for _ in range(3):
        pool.step(_random_ctrl(humanoid, rng), 2)
    before = _state(pool)
    ids = np.array([1, 5, 11])
    qpos, qvel = _perturbed(pool, rng)
    pool.reset(ids, qpos[ids], qvel[ids])
    others = np.setdiff1d(np.arange(N), ids)
    assert np.array_equal(_state(pool)[others], before[others])
    np.testing.assert_array_equal(pool.qpos[ids], qpos[ids])
    np.testing.assert_array_equal(pool.qvel[ids], qvel[ids])
    assert not pool.ctrl[ids].any()
    # the derived fields of the reset envs follow the new qpos
    np.testing.assert_allclose(pool.body_pos_w[ids, humanoid.body("pelvis").id], qpos[ids, :3], atol=1e-12)


def test_reset_writes_the_rows_batch_reset_would(humanoid):
    """pool.reset's row copies leave exactly what Batch.reset(stage=NONE) + the same writes + forward leave."""
    rng = np.random.default_rng(4)
    pools = [BatchEnvPool(humanoid, N, nthread=2) for _ in range(2)]
    ctrls = [_random_ctrl(humanoid, rng) for _ in range(3)]
    for p in pools:
        for c in ctrls:
            p.step(c, 2)
    pools[0]._batch.warning[[2, 9]] = 7  # stale warnings must be cleared
    pools[1]._batch.warning[[2, 9]] = 7
    ids = np.array([0, 2, 9, 15])
    qpos, qvel = _perturbed(pools[0], rng)
    pools[0].reset(ids, qpos[ids], qvel[ids])
    b = pools[1]._batch
    b.reset(ids, stage=int(mujoco.mjtStage.mjSTAGE_NONE))
    pools[1].qpos[ids] = qpos[ids]
    pools[1].qvel[ids] = qvel[ids]
    b.forward(ids, int(mujoco.mjtStage.mjSTAGE_VEL))
    assert np.array_equal(_state_rows(pools[0]), _state_rows(pools[1]))
    assert np.array_equal(pools[0]._batch.warning, b.warning)
    for name in ("xpos", "xquat", "cvel"):
        assert np.array_equal(getattr(pools[0], name), getattr(pools[1], name)), name
    for p in pools:
        p.step(ctrls[0], 2)
    assert np.array_equal(_state_rows(pools[0]), _state_rows(pools[1]))


def test_without_contacts_derived_fields_and_physics_are_unchanged(humanoid):
    """contacts=False: the state and every bound kinematic, velocity and sensor field equal a contacts=True
    pool's bit for bit through steps and resets; only the contact fields are empty, and each env's disable
    flags are the model's again after every call."""
    rng = np.random.default_rng(6)
    full, lean = (BatchEnvPool(humanoid, N, nthread=2, contacts=c) for c in (True, False))
    assert full.contacts and not lean.contacts
    fields = ("xpos", "xquat", "cvel", "subtree_com", "sensordata", "qfrc_bias", "qfrc_passive", "actuator_length")
    ncon = [p.bind("ncon") for p in (full, lean)]
    contacts_seen = 0
    for t in range(12):
        c = _random_ctrl(humanoid, rng)
        for p in (full, lean):
            p.step(c, 3)
        if t % 4 == 1:  # a reset's forward takes the same path
            ids = np.sort(rng.choice(N, 5, replace=False))
            qpos, qvel = _perturbed(full, rng)
            for p in (full, lean):
                p.reset(ids, qpos[ids], qvel[ids])
        assert np.array_equal(_state_rows(full), _state_rows(lean)), t
        for f in fields:
            assert np.array_equal(full.bind(f), lean.bind(f)), (t, f)
        contacts_seen += int(ncon[0].sum())
        assert not ncon[1].any()
        assert (lean._batch.expanded("opt.disableflags") == humanoid.opt.disableflags).all()
    assert contacts_seen > 0  # the humanoid stands on its floor: the comparison covered contacts
    lean.forward([0, 3])  # ids as a list, as forward's callers may pass them
    full.forward([0, 3])
    assert np.array_equal(full.xpos, lean.xpos) and not ncon[1].any()
    assert (lean._batch.expanded("opt.disableflags") == humanoid.opt.disableflags).all()


def test_without_contacts_flags_come_back_after_an_error_and_masks_select_envs(humanoid, monkeypatch):
    pool = BatchEnvPool(humanoid, N, nthread=1, contacts=False)
    flags = pool._batch.expanded("opt.disableflags")
    real = pool._batch

    class Failing:
        def __getattr__(self, name):
            return getattr(real, name)

        def forward(self, ids, stage):
            assert (flags[ids] & mujoco.mjtDisableBit.mjDSBL_CONTACT).all()  # raised for these envs only
            assert not (np.delete(flags, ids) & mujoco.mjtDisableBit.mjDSBL_CONTACT).any()
            raise mjbatch.SimulationError(np.array([ids[0]]), "mj_forward failed", N)

    monkeypatch.setattr(pool, "_batch", Failing())
    mask = np.zeros(N, dtype=bool)
    mask[[2, 7]] = True
    pool.forward(mask)  # a bool mask selects envs 2 and 7
    assert (flags == humanoid.opt.disableflags).all()
    assert np.flatnonzero(pool.bad_envs).tolist() == [2]
    with pytest.raises(AttributeError):
        pool.contacts = True  # read-only: the flags exist only for a pool built without contacts


def test_without_contacts_contact_forces_are_refused(make, humanoid_imu):
    make(humanoid_imu, 4, nthread=1, outputs=(*BODY_STATE, CONTACT_FORCE)).close()
    with pytest.raises(OutputUnavailable, match=CONTACT_FORCE):
        make(humanoid_imu, 4, nthread=1, contacts=False, outputs=(*BODY_STATE, CONTACT_FORCE))


def test_without_contacts_acceleration_fields_are_refused(humanoid):
    with pytest.raises(OutputUnavailable, match="cfrc_ext"):
        BatchEnvPool(humanoid, 4, nthread=1, contacts=False, outputs=("xpos", "cfrc_ext"))


def test_contact_forces_need_a_sensor_that_makes_mujoco_compute_them(humanoid):
    """MuJoCo computes cfrc_ext in a step only for a model with an acceleration-stage sensor (the humanoid has
    none)."""
    with pytest.raises(OutputUnavailable, match="accelerometer, force, torque or frame acceleration sensor"):
        BatchEnvPool(humanoid, 2, nthread=1, outputs=(CONTACT_FORCE,))


def test_contact_force_is_the_live_force_half_of_mujocos_external_body_forces(humanoid_imu):
    humanoid = humanoid_imu
    pool = BatchEnvPool(humanoid, 4, nthread=1, outputs=(CONTACT_FORCE,))
    force_half = pool.bind("cfrc_ext")[:, :, 3:]  # cfrc_ext: (torque, force) per body, about the subtree com
    force = pool.body_contact_force_w
    assert force.shape == (4, humanoid.nbody, 3) and force.strides == force_half.strides
    # the same memory: the live values after every step (the G1 tests check them against MjData's own forces)
    assert force.__array_interface__["data"][0] == force_half.__array_interface__["data"][0]


def test_a_persistent_pool_always_computes_contacts(humanoid):
    """A persistent batch continues its next step from the post-step stage: contacts=False must not thin it."""
    pool = BatchEnvPool(humanoid, N, nthread=1, persistent=True, contacts=False)
    ncon = pool.bind("ncon")
    pool.step(_random_ctrl(humanoid, np.random.default_rng(0)), 2)
    assert pool.contacts and ncon.sum() > 0
    assert pool._batch.expanded("opt.disableflags") is None


def test_reset_validates_input(make, humanoid):
    pool = make(humanoid, N, nthread=1, outputs=BODY_STATE)
    with pytest.raises(ValueError, match="needs qpos"):
        pool.reset(np.array([0]), np.zeros((1, 3)), np.zeros((1, humanoid.nv)))
    with pytest.raises(ValueError, match="env ids"):
        pool.reset(np.array([N]), np.zeros((1, humanoid.nq)), np.zeros((1, humanoid.nv)))
    before = _state(pool)
    for ids in ([3, 3], [1, 5, 1], [0, 2, 2, 4], [5, 1]):  # repeated or out of order: refused, no row written
        with pytest.raises(ValueError, match="distinct and increasing"):
            pool.reset(np.array(ids), np.zeros((len(ids), humanoid.nq)), np.zeros((len(ids), humanoid.nv)))
    np.testing.assert_array_equal(_state(pool), before)
    with pytest.raises(ValueError, match="finite"):
        q = np.tile(humanoid.qpos0, (1, 1))
        q[0, 0] = np.nan
        pool.reset(np.array([0]), q, np.zeros((1, humanoid.nv)))


@pytest.mark.parametrize("field", ["qpos", "qvel"])
def test_nan_injection_lands_in_bad_envs(make, humanoid, field):
    rng = np.random.default_rng(2)
    pool = make(humanoid, N, nthread=2)
    getattr(pool, field)[3, 8] = np.nan
    getattr(pool, field)[9, 8] = np.inf
    bad = pool.step(_random_ctrl(humanoid, rng), 2)  # must not raise
    assert set(np.flatnonzero(bad)) == {3, 9}
    assert 3 in pool.bad_reasons and 9 in pool.bad_reasons
    # stays flagged until the task resets it
    assert pool.step(None, 1)[[3, 9]].all()
    pool.reset(np.array([3, 9]), np.tile(humanoid.qpos0, (2, 1)), np.zeros((2, humanoid.nv)))
    assert not pool.step(_random_ctrl(humanoid, rng), 2).any()
    assert pool.bad_reasons == {}


def test_simulation_error_is_reported_per_env(humanoid, monkeypatch):
    pool = BatchEnvPool(humanoid, N, nthread=1)
    real = pool._batch

    class Failing:
        def __getattr__(self, name):
            return getattr(real, name)

        def step(self, ids, nstep, stage):
            real.step(ids, nstep, stage)
            raise mjbatch.SimulationError(np.array([4]), "mj_step failed", N)

    monkeypatch.setattr(pool, "_batch", Failing())
    bad = pool.step(None, 1)
    assert np.flatnonzero(bad).tolist() == [4]


@pytest.mark.skipif(not cpu.affinity_supported(), reason="needs thread affinity")
def test_pinning_reads_back(make, humanoid):
    ids = list(reversed(cpu.usable_cpus()))[:2]
    caller_before = thread_affinity(cpu.current_tid())
    pool = make(humanoid, N, cpu_ids=ids)
    assert pool.nthread == len(ids) and pool.cpu_ids == ids
    # the caller's thread (the pool's first) and the pool's own threads, each on its CPU
    assert [thread_affinity(t) for t in [cpu.current_tid(), *pool.pool_tids]] == [{c} for c in ids]
    # pinned threads still step correctly
    assert not pool.step(None, 2).any()
    pool.close()
    assert thread_affinity(cpu.current_tid()) == caller_before


@pytest.mark.skipif(not cpu.affinity_supported(), reason="needs thread affinity")
def test_pool_rejects_bad_cpu_ids(make, humanoid):
    with pytest.raises(ValueError, match="outside the usable"):
        make(humanoid, N, cpu_ids=[99_999])
    with pytest.raises(ValueError, match="duplicate"):
        make(humanoid, N, cpu_ids="0,0")
    with pytest.raises(ValueError, match="nthread"):
        make(humanoid, N, nthread="fast")


def test_mujoco_autotune_and_pinning_are_exclusive(humanoid):
    with pytest.raises(ValueError, match="exclusive"):
        BatchEnvPool(humanoid, N, nthread="auto", cpu_ids=[0])


@pytest.mark.skipif(not cpu.affinity_supported() or cpu.usable_cpu_count() < 2, reason="needs 2 usable cpus")
def test_a_second_pinned_pool_in_the_same_thread(make, humanoid):
    ids = cpu.usable_cpus()
    first = make(humanoid, N, cpu_ids=ids[:1])
    assert thread_affinity(cpu.current_tid()) == {ids[0]}
    assert cpu.usable_cpus() == ids  # the pinned caller still sees the process's CPUs
    second = make(humanoid, N, cpu_ids=ids[1:2])
    assert thread_affinity(cpu.current_tid()) == {ids[1]}
    second.close()
    first.close()
    assert thread_affinity(cpu.current_tid()) == set(ids)


def test_exploding_velocity_is_flagged_bad(make, humanoid):
    """A finite but absurd |qvel| (an unstable integration) counts as diverged; a bound of None does not flag it."""
    qpos = np.tile(humanoid.qpos0, (N, 1))
    qvel = np.zeros((N, humanoid.nv))
    qvel[[2, 9], 0] = 1e5  # root flying at 100 km/s: finite, far below MuJoCo's own 1e10 check
    for max_qvel, expected in ((1e3, [2, 9]), (None, [])):
        pool = make(humanoid, N, nthread=1, max_qvel=max_qvel)
        pool.reset(np.arange(N), qpos, qvel)
        bad = pool.step(None, 1)
        assert np.flatnonzero(bad).tolist() == expected
        if expected:
            assert "max_qvel" in pool.bad_reasons[2]
    with pytest.raises(ValueError, match="max_qvel"):
        make(humanoid, N, nthread=1, max_qvel=0)


def test_a_reset_state_mujoco_rejects_is_flagged_bad(humanoid):
    """MuJoCo resets a row itself on a huge qvel (BADQVEL) during the reset's forward: the env is still bad."""
    pool = BatchEnvPool(humanoid, N, nthread=1, max_qvel=None)
    qvel = np.zeros((N, humanoid.nv))
    qvel[5, 6] = 1e12
    pool.reset(np.arange(N), np.tile(humanoid.qpos0, (N, 1)), qvel)
    assert np.flatnonzero(pool.step(None, 1)).tolist() == [5]
    assert pool.bad_reasons[5] == "divergence warning"


def test_silenced_mujoco_warnings_still_mark_envs_bad(humanoid, capfd):
    before = mujoco.get_mju_user_warning()
    BatchEnvPool.silence_warnings()
    try:
        pool = BatchEnvPool(humanoid, N, nthread=2, max_qvel=None)
        qvel = np.zeros((N, humanoid.nv))
        qvel[:, 6] = 1e12
        pool.reset(np.arange(N), np.tile(humanoid.qpos0, (N, 1)), qvel)
        assert pool.step(None, 1).all()
    finally:
        mujoco.set_mju_user_warning(before)
    out, err = capfd.readouterr()
    assert "WARNING" not in out + err


def _reference_health(qpos, qvel, max_qvel, counts, warn_seen):
    """The serial NumPy health check the parallel kernel replaced: (reason per marked env in order, new warn_seen)."""
    marks = []
    vmax = np.abs(qvel).max(axis=1)  # NaN and inf propagate into the max
    finite = np.isfinite(qpos).all(axis=1) & np.isfinite(vmax)
    marks.append((np.flatnonzero(~finite), "non-finite state"))
    if max_qvel is not None:
        marks.append((np.flatnonzero(vmax > max_qvel), f"|qvel| over max_qvel={max_qvel:g}"))
    rose = (counts > warn_seen).any(axis=1)
    marks.append((np.flatnonzero(rose), "divergence warning"))
    seen = warn_seen.copy()
    seen[rose] = counts[rose]
    reasons: dict[int, str] = {}
    for ids, reason in marks:
        for i in ids:
            reasons.setdefault(int(i), reason)  # the first reason of an env stays
    return reasons, seen


@pytest.mark.parametrize("max_qvel", [50.0, None])
def test_health_mask_matches_the_numpy_reference(humanoid, max_qvel):
    """NaN/inf in qpos or qvel (alone and together), |qvel| just over and at the bound, rising warning counters."""
    n = 64
    rng = np.random.default_rng(9)
    pool = BatchEnvPool(humanoid, n, nthread=2, max_qvel=max_qvel)
    cols = pool._warn_cols  # the columns the kernel reads
    for _ in range(4):
        pool.reset(np.arange(n), *_perturbed(pool, rng))
        qpos, qvel = pool.qpos, pool.qvel
        qvel[...] = rng.normal(0, 20, qvel.shape)  # some rows over 50 by chance
        for arr in (qpos, qvel):
            for value in (np.nan, np.inf, -np.inf):
                arr[rng.integers(0, n, 3), rng.integers(0, arr.shape[1], 3)] = value
        qvel[rng.integers(0, n), 4] = 50.0  # at the bound: not over
        qvel[rng.integers(0, n), :] = np.nan  # NaN with no inf: non-finite, not "fast"
        pool._batch.warning[rng.integers(0, n, 5), cols[rng.integers(0, len(cols), 5)], 1] += 1
        want, seen = _reference_health(qpos.copy(), qvel.copy(), max_qvel, pool._warning_count[:, cols].copy(),
                                       pool._warn_seen.copy())
        pool._check_health()  # the kernel alone (a step would move the states)
        assert np.array_equal(pool.bad_envs, np.isin(np.arange(n), list(want)))
        assert pool.bad_reasons == want
        assert np.array_equal(pool._warn_seen, seen)
        assert len(want) > 5 and len(set(want.values())) == (3 if max_qvel else 2)  # every reason seen


def test_controls_are_copied_whatever_their_dtype(make, humanoid):
    pool = make(humanoid, N, nthread=2)
    ctrl = np.random.default_rng(3).uniform(-1, 1, (N, humanoid.nu)).astype(np.float32)
    pool.step(ctrl, 1)
    assert np.array_equal(pool.ctrl, ctrl.astype(np.float64))
