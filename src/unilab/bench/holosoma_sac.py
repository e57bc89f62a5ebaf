"""holosoma 0.0.3's own FastSAC update, loaded from the wheel unilab fetches (never installed), at a recipe's sizes.

``FastSACAgent.setup``, ``_sample_and_prepare_batches``, ``_update_main`` and ``_update_pol`` and holosoma's replay
buffer and normaliser run as their source is; :meth:`HolosomaLearner.iteration` is the body of ``FastSACAgent.learn``'s
training block around them (one batch sampled and normalised for ``num_updates`` updates, the actor on every
``policy_frequency``-th, the metrics into its average meters, the Polyak target update), without the env steps.

The agent's module imports packages its update never calls (logging, callbacks, ONNX export, its env and config
classes). Those are replaced by the stand-ins of :data:`STAND_INS` while the wheel's modules load; ``tensordict`` is the
installed one when there is one, else a dict (the update only reads and writes nested keys), and the JSON says which.
Its symmetry augmentation needs holosoma's own env, so with ``use_symmetry`` the mirror is unilab's signed permutation
(the same work: a gather and a sign flip per observation and action, the batch doubled).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import sys
import tempfile
import types
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from unilab.algo.sac.config import SACConfig

PACKAGES = ("holosoma", "holosoma.agents", "holosoma.agents.fast_sac", "holosoma.agents.base_algo",
            "holosoma.agents.modules", "holosoma.utils")
"""Packages of the wheel whose modules are loaded (empty package objects: their ``__init__`` is not needed)."""
MODULES = ("holosoma.utils.safe_torch_import", "holosoma.utils.average_meters", "holosoma.agents.base_algo.base_algo",
           "holosoma.agents.fast_sac.fast_sac", "holosoma.agents.fast_sac.fast_sac_utils",
           "holosoma.agents.fast_sac.fast_sac_agent")
"""The wheel's modules that run, in import order."""


class _Anything:
    """Stands in for a class or function the update never calls (logging, callbacks, export)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return self


def _tensordict_stand_in(source: Mapping[str, Any], batch_size: Any = None, device: Any = None) -> dict[str, Any]:
    return {k: _tensordict_stand_in(v) if isinstance(v, Mapping) else v for k, v in source.items()}


STAND_INS: dict[str, dict[str, Any]] = {
    "loguru": {"logger": _Anything()},
    "holosoma.config_types": {},
    "holosoma.config_types.algo": {"FastSACConfig": object, "AlgoInitConfig": object},
    "holosoma.envs": {},
    "holosoma.envs.base_task": {},
    "holosoma.envs.base_task.base_task": {"BaseTask": object},
    "holosoma.agents.callbacks": {},
    "holosoma.agents.callbacks.base_callback": {"RLEvalCallback": object},
    "holosoma.agents.modules.augmentation_utils": {"SymmetryUtils": _Anything},
    "holosoma.agents.modules.logging_utils": {"LoggingHelper": _Anything},
    "holosoma.utils.helpers": {"instantiate": _Anything()},
    "holosoma.utils.inference_helpers": dict.fromkeys(
        ("attach_onnx_metadata", "export_motion_and_policy_as_onnx", "export_policy_as_onnx",
         "get_command_ranges_from_env", "get_control_gains_from_config", "get_urdf_text_from_robot_config"),
        _Anything()),
}
"""Module -> attributes: what the agent's module imports and its update never runs."""


def tensordict_version() -> str | None:
    """The installed tensordict's version, None without one."""
    try:
        from importlib.metadata import PackageNotFoundError, version
        return version("tensordict")
    except PackageNotFoundError:
        return None


def load_agent_class(wheel: Path) -> type:
    """holosoma's ``FastSACAgent`` class, its modules executed from ``wheel`` (``torch.set_float32_matmul_precision``,
    which its module sets on import, is put back)."""
    try:
        zf = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as err:
        raise FileNotFoundError(f"holosoma wheel {wheel}: {err}; run `unilab-assets fetch`") from err
    made: dict[str, types.ModuleType] = {}
    for name in PACKAGES:
        made[name] = types.ModuleType(name)
        made[name].__path__ = []
    for name, attrs in STAND_INS.items():
        if name == "loguru" and importlib.util.find_spec("loguru") is not None:
            continue
        made[name] = types.ModuleType(name)
        made[name].__dict__.update(attrs)
        made[name].__path__ = []
    if tensordict_version() is None:
        made["tensordict"] = types.ModuleType("tensordict")
        made["tensordict"].TensorDict = _tensordict_stand_in
    precision = torch.get_float32_matmul_precision()
    saved = {name: sys.modules.get(name) for name in (*made, *MODULES)}
    sys.modules.update(made)
    try:
        with zf:
            for name in MODULES:
                path = name.replace(".", "/") + ".py"
                module = types.ModuleType(name)
                module.__file__ = f"{wheel}/{path}"
                sys.modules[name] = module
                code = compile(zf.read(path), module.__file__, "exec")
                exec(code, module.__dict__)  # noqa: S102 - holosoma's own module source, from the verified wheel
        return sys.modules["holosoma.agents.fast_sac.fast_sac_agent"].FastSACAgent
    finally:
        torch.set_float32_matmul_precision(precision)
        for name, old in saved.items():  # the loaded modules keep what they imported; the interpreter forgets them
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old


def holosoma_config(cfg: SACConfig, device: torch.device) -> SimpleNamespace:
    """holosoma's ``FastSACConfig`` fields that its set-up and update read, at ``cfg``'s sizes and numbers (compile and
    bf16 autocast as unilab's learner uses them on ``device``)."""
    for dims in (cfg.actor_hidden_dims, cfg.critic_hidden_dims):
        h = dims[0]
        if list(dims) != [h, h // 2, h // 4]:
            raise ValueError(f"holosoma's networks are widths (h, h/2, h/4); this recipe has {list(dims)}")
    if not cfg.distributional:
        raise ValueError("holosoma's FastSAC critic is distributional; this recipe sets algo.distributional=false")
    on_cuda = device.type == "cuda"
    return SimpleNamespace(
        num_learning_iterations=cfg.max_iterations, critic_learning_rate=cfg.critic_lr,
        actor_learning_rate=cfg.actor_lr, alpha_learning_rate=cfg.alpha_lr, buffer_size=cfg.buffer_size,
        num_steps=cfg.n_steps, gamma=cfg.gamma, tau=cfg.tau, batch_size=cfg.batch_size,
        learning_starts=cfg.learning_starts, policy_frequency=cfg.policy_frequency, num_updates=cfg.num_updates,
        target_entropy_ratio=cfg.target_entropy_scale, num_atoms=cfg.num_atoms, v_min=cfg.v_min, v_max=cfg.v_max,
        critic_hidden_dim=cfg.critic_hidden_dims[0], actor_hidden_dim=cfg.actor_hidden_dims[0],
        use_symmetry=cfg.use_symmetry, alpha_init=cfg.alpha_init, use_autotune=cfg.autotune_alpha, use_tanh=True,
        log_std_max=cfg.log_std_max, log_std_min=cfg.log_std_min, compile=bool(cfg.compile and on_cuda),
        obs_normalization=cfg.obs_normalization, use_layer_norm=cfg.layer_norm, num_q_networks=cfg.num_q,
        max_grad_norm=cfg.max_grad_norm, amp=bool(cfg.amp and on_cuda), amp_dtype="bf16",
        weight_decay=cfg.weight_decay, save_interval=0, logging_interval=100, use_cnn_encoder=False,
        encoder_obs_key="perception_obs", encoder_obs_shape=(1, 13, 9), actor_obs_keys=["actor_obs"],
        critic_obs_keys=["critic_obs"], eval_callbacks=None)


class _Mirror:
    """holosoma's ``SymmetryUtils`` interface over unilab's signed permutations (see module docs)."""

    def __init__(self, mirror: Mapping[str, tuple[Sequence[int], Sequence[float]]], device: torch.device):
        self.maps = {key: (torch.as_tensor(perm, device=device), torch.as_tensor(sign, device=device))
                     for key, (perm, sign) in mirror.items()}

    def _both(self, x: torch.Tensor, key: str) -> torch.Tensor:
        perm, sign = self.maps[key]
        return torch.cat([x, x[..., perm] * sign])

    def augment_observations(self, obs: torch.Tensor, env: Any, obs_list: Sequence[str]) -> torch.Tensor:
        return self._both(obs, "obs" if list(obs_list) == ["actor_obs"] else "critic_obs")

    def augment_actions(self, actions: torch.Tensor) -> torch.Tensor:
        return self._both(actions, "action")


@contextlib.contextmanager
def matmul_precision(value: str) -> Iterator[None]:
    """``torch.set_float32_matmul_precision(value)`` inside (holosoma's agent sets "high" for itself)."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(value)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


class HolosomaLearner:
    """holosoma's agent set up for an env of these widths, its replay filled from ``data`` (unilab's replay storage
    ``(num_envs, steps, ...)``); :meth:`iteration` runs ``cfg.num_updates`` updates as its ``learn`` does."""

    def __init__(self, wheel: Path, cfg: SACConfig, device: torch.device, obs_dim: int, critic_obs_dim: int,
                 action_dim: int, action_bound: Sequence[float], data: Mapping[str, torch.Tensor],
                 mirror: Mapping[str, tuple[Sequence[int], Sequence[float]]] | None = None):
        agent_class = load_agent_class(wheel)
        self.cfg = cfg
        bound = [float(b) for b in action_bound]
        dims = {"actor_obs": obs_dim, "critic_obs": critic_obs_dim}
        # holosoma's bound: max(|lo - q0|, |hi - q0|) / action_scale; these limits make it unilab's b_j
        env = SimpleNamespace(
            num_envs=cfg.num_envs, device=str(device),
            robot_config=SimpleNamespace(
                actions_dim=action_dim, dof_names=[f"joint_{j}" for j in range(action_dim)],
                dof_pos_lower_limit_list=[-0.25 * b for b in bound], dof_pos_upper_limit_list=[0.25 * b for b in bound],
                init_state=SimpleNamespace(default_joint_angles={}), control=SimpleNamespace(action_scale=0.25)),
            observation_manager=SimpleNamespace(get_obs_dims=lambda: dims, cfg=SimpleNamespace(groups={})))
        self._log_dir = tempfile.TemporaryDirectory(prefix="unilab_holosoma_")
        with matmul_precision("high"), contextlib.redirect_stdout(io.StringIO()):  # setup prints the networks
            self.agent = agent = agent_class(env, holosoma_config(cfg, device), str(device), self._log_dir.name)
            agent.setup()
        if cfg.use_symmetry:
            if mirror is None:
                raise ValueError("algo.use_symmetry needs the task's mirror")
            agent.symmetry_utils = _Mirror(mirror, device)
        rb = agent.rb
        steps = data["obs"].shape[1]
        if steps != rb.buffer_size:
            raise ValueError(f"holosoma's replay holds {rb.buffer_size} steps per env, the data {steps}")
        with torch.no_grad():
            for mine, theirs in (("obs", "observations"), ("next_obs", "next_observations"),
                                 ("critic_obs", "critic_observations"), ("next_critic_obs", "next_critic_observations"),
                                 ("action", "actions"), ("reward", "rewards")):
                getattr(rb, theirs).copy_(data[mine])
            rb.dones.copy_(data["terminated"] | data["truncated"])
            rb.truncations.copy_(data["truncated"])
        rb.ptr = rb.buffer_size
        # its agent's own update methods, compiled as its learn() compiles them (the normalisers too)
        main, pol = agent._update_main, agent._update_pol  # noqa: SLF001 - holosoma's update, run as learn() runs it
        self.normalize = (agent.obs_normalizer.forward, agent.critic_obs_normalizer.forward)
        self.update_main, self.update_pol = main, pol
        if agent.config.compile:
            self.update_main, self.update_pol = torch.compile(main), torch.compile(pol)
            self.normalize = tuple(torch.compile(f) for f in self.normalize)
        self.global_step = 0

    def iteration(self) -> None:
        """One iteration of ``FastSACAgent.learn``'s training block: ``num_updates`` updates, and at its logging
        interval the metrics' read."""
        self.updates()
        if self.global_step % self.agent.config.logging_interval == 0:
            self.read_metrics()

    def updates(self) -> None:
        """The iteration's updates."""
        agent, a = self.agent, self.agent.config
        env_batch = max(a.batch_size // agent.env.num_envs // agent.gpu_world_size, 1)
        with matmul_precision("high"):
            batches = agent._sample_and_prepare_batches(  # noqa: SLF001 - as its learn() calls it
                env_batch, a.num_updates, *self.normalize)
            for i, data in enumerate(batches):
                out = self.update_main(data)
                metrics = dict(zip(("buffer_rewards", "critic_grad_norm", "qf_loss", "qf_max", "qf_min",
                                    "alpha_loss"), out))
                if (i % a.policy_frequency == 1) if a.num_updates > 1 else (self.global_step % a.policy_frequency == 0):
                    self._actor_metrics = dict(zip(("actor_grad_norm", "actor_loss", "policy_entropy", "action_std"),
                                                   self.update_pol(data)))
                metrics.update(getattr(self, "_actor_metrics", {}))
                metrics["alpha_value"] = agent.log_alpha.exp().detach().mean()
                agent.training_metrics.add(metrics)
                with torch.no_grad():
                    src = [p.data for p in agent.qnet.parameters()]
                    tgt = [p.data for p in agent.qnet_target.parameters()]
                    torch._foreach_mul_(tgt, 1.0 - a.tau)
                    torch._foreach_add_(tgt, src, alpha=a.tau)
        self.global_step += 1

    def read_metrics(self) -> dict[str, float]:
        """What its ``learn`` does at a log interval: the means of the meters, read on the host."""
        return {k: float(v) for k, v in self.agent.training_metrics.mean_and_clear().items()}

    def close(self) -> None:
        self.agent.writer.close()
        self._log_dir.cleanup()
