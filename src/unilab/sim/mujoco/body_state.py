"""Each body's world-frame velocity at its origin, from MuJoCo's ``cvel``: the pool's ``body_*_vel_w`` outputs.

MuJoCo's ``cvel`` is a body's spatial velocity (angular, then linear) with the linear part taken at the centre of mass
of the body's root subtree (``subtree_com[rootid]``); tasks and reference motions want the body origin's,
``v + w x (xpos - subtree_com[root])``. Shifting here keeps MuJoCo's conventions inside the MuJoCo backend.
"""

from __future__ import annotations

from numba import njit, prange

from unilab.sim.work_claims import LEAST_ROWS, claimed, new_counter, num_chunks


@njit(cache=True, fastmath=False, inline="always")
def origin_velocity_env(e, xpos, cvel, subtree_com, rootid, lin, ang):
    """Env ``e``: ``lin[e, i]``/``ang[e, i]`` = world-frame linear/angular velocity of body ``i``'s origin, for
    ``lin``'s bodies (zero-size ``lin``/``ang``, no body state asked for: nothing)."""
    for i in range(lin.shape[1]):
        rt = rootid[i]
        wx, wy, wz = cvel[e, i, 0], cvel[e, i, 1], cvel[e, i, 2]
        ox = xpos[e, i, 0] - subtree_com[e, rt, 0]
        oy = xpos[e, i, 1] - subtree_com[e, rt, 1]
        oz = xpos[e, i, 2] - subtree_com[e, rt, 2]
        ang[e, i, 0] = wx
        ang[e, i, 1] = wy
        ang[e, i, 2] = wz
        lin[e, i, 0] = cvel[e, i, 3] + wy * oz - wz * oy
        lin[e, i, 1] = cvel[e, i, 4] + wz * ox - wx * oz
        lin[e, i, 2] = cvel[e, i, 5] + wx * oy - wy * ox


@njit(cache=True, parallel=True, fastmath=False)
def origin_velocities(ids, xpos, cvel, subtree_com, rootid, lin, ang):
    """:func:`origin_velocity_env` for rows ``ids``, in claimed chunks (after a reset or forward)."""
    n = ids.shape[0]
    counter = new_counter()
    for _ in prange(num_chunks(n, LEAST_ROWS)):
        for k in claimed(counter, n, LEAST_ROWS):
            origin_velocity_env(ids[k], xpos, cvel, subtree_com, rootid, lin, ang)
