"""Per-env state rows: one declaration gives the buffers and the fields of the struct the rows read."""

from __future__ import annotations

import numpy as np
import pytest

from unilab.tasks.core.state import StateSpec
from unilab.tasks.g1_motion_tracking.env import MotionTrackingEnv
from unilab.tasks.g1_motion_tracking.state import STATE, TaskArrays


def test_rows_give_buffers_of_their_shape_dtype_and_fill():
    spec = StateSpec((("pos", ("n", "B", 3), np.float64), ("age", ("n", "K"), np.int64, 7)))
    st = spec.allocate(n=4, B=2, K=5)
    assert st.pos.shape == (4, 2, 3) and st.pos.dtype == np.float64 and not st.pos.any()
    assert st.age.shape == (4, 5) and st.age.dtype == np.int64 and (st.age == 7).all()
    assert spec.values(st)[0] is st.pos and spec.values(st)[1] is st.age
    with pytest.raises(ValueError, match="state 'age': no size given for dimension 'K'"):
        spec.allocate(n=4, B=2)


def test_g1_terms_read_every_declared_row():
    assert set(STATE.names) <= set(TaskArrays._fields)
    assert len(set(STATE.names)) == len(STATE.names)


def test_the_env_state_is_the_struct_the_terms_read(tiny_cfg):
    env = MotionTrackingEnv(tiny_cfg, 3)
    for name in STATE.names:
        assert getattr(env.arrays, name) is getattr(env.state, name), name
    env.reset()
    np.testing.assert_array_equal(env.state.joint_pos, env.pool.qpos[:, env.qpos_adr])  # the gather stage filled it
    env.close()
