"""FastSAC hyperparameters: the Hydra ``algo`` group's structured config (presets such as ``sac_cpu.yaml`` list only
what they change). Defaults are holosoma's published G1 whole-body-tracking FastSAC recipe (``g1_29dof_wbt_fast_sac``);
``config/algo/sac.yaml`` lists where unilab differs and why."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from unilab.dataclass_config import build_dataclass, check_fields

_DEVICE = re.compile(r"auto|cpu|mps|cuda(:\d+)?")


@dataclass
class SACConfig:
    """All FastSAC hyperparameters (one iteration = one env step of all envs)."""

    # --- run ---
    seed: int = 0
    """Seed for network init, action noise and replay sampling."""
    device: str = "auto"
    """Learner device: "auto" (cuda if available, else cpu), "cpu", "cuda", "cuda:1"..."""
    max_iterations: int = 400_000
    """Training iterations; each collects one step from every env."""

    # --- data ---
    num_envs: int = 4096
    """Parallel environments feeding the replay buffer."""
    buffer_size: int = 1024
    """Replay capacity in transitions PER ENV (total = num_envs * buffer_size)."""
    batch_size: int = 8192
    """Transitions per gradient step."""
    learning_starts: int = 10
    """Steps per env in the replay before the first gradient step, at the start and after a resume without its replay
    (the policy acts from the first step: a fresh actor holds the default pose with a small spread, as holosoma's)."""
    n_steps: int = 1
    """Length of the n-step return window (cut at the first episode end)."""
    obs_normalization: bool = True
    """Normalise actor and critic observations with running mean/var."""
    obs_norm_eps: float = 0.01
    """Added to the running std before dividing (caps the gain of near-constant inputs)."""

    # --- objective ---
    gamma: float = 0.99
    """Discount factor per env step."""
    tau: float = 0.05
    """Soft target update rate: target <- (1 - tau) * target + tau * online."""
    num_updates: int = 4
    """Gradient steps per iteration (update-to-data ratio)."""
    policy_frequency: int = 2
    """The actor steps once every this many critic updates (the temperature at every critic update, as holosoma)."""
    use_symmetry: bool = False
    """Left/right symmetry augmentation (holosoma's use_symmetry): every sampled batch is trained together with
    its mirror image (observations, next observations and actions mirrored, rewards and dones repeated), so
    each update sees twice the batch. Needs a task with a mirror (EnvSpec.mirror: G1 tracking has one)."""

    # --- optimisation ---
    actor_lr: float = 3e-4
    """AdamW learning rate of the actor."""
    critic_lr: float = 3e-4
    """AdamW learning rate of the critic ensemble."""
    early_lr: float | None = None
    """AdamW learning rate of actor and critic for the first early_lr_env_steps env steps, actor_lr / critic_lr
    after; null: those from the start (holosoma). The banner says which."""
    early_lr_env_steps: int = 0
    """Env steps (iterations x num_envs, per rank) that early_lr lasts."""
    alpha_lr: float = 3e-4
    """AdamW learning rate of log(alpha) (AdamW's default weight decay 0.01, as holosoma)."""
    adam_beta1: float = 0.9
    """First-moment decay of all three AdamW optimisers (holosoma: 0.9)."""
    adam_beta2: float = 0.95
    """Second-moment decay of all three AdamW optimisers (holosoma: 0.95; faster than torch's 0.999 default,
    so the step size follows the critic's moving targets)."""
    weight_decay: float = 0.001
    """AdamW weight decay of actor and critic."""
    max_grad_norm: float = 0.0
    """Gradient norm clip of actor and critic; 0 disables clipping."""
    bc_weight: float = 0.0
    """Weight of a pull of the actor's mean action towards the replayed actions, added to the actor loss:
    bc_weight x sum_j (b_j (tanh mu_j(s) - a_j))^2 on the batch's (s, a), b_j the action bounds (the units of
    the action-rate penalty). The critic has no data far from the actions taken, and its slope there, followed at
    full Adam steps, moves a fresh policy to a posture that falls within a few steps; this keeps the mean near the
    data while the data follow the policy. 0: off (holosoma, `sac`); `sac_cpu` uses 0.02."""
    max_nonfinite_updates: int = 10
    """Updates in a row whose loss or gradient is NaN/inf (each such step is skipped) before training stops."""

    # --- networks ---
    actor_hidden_dims: list[int] = field(default_factory=lambda: [512, 256, 128])
    """Hidden layer widths of the actor MLP."""
    critic_hidden_dims: list[int] = field(default_factory=lambda: [768, 384, 192])
    """Hidden layer widths of each critic MLP."""
    layer_norm: bool = True
    """LayerNorm after every hidden Linear layer (actor and critic)."""
    activation: str = "silu"
    """Hidden activation: "silu", "relu", "elu" or "tanh"."""
    log_std_min: float = -5.0
    """Lower end of the pre-tanh Gaussian log-std."""
    log_std_max: float = 0.0
    """Upper end of the pre-tanh Gaussian log-std range (squashed smoothly into it)."""
    init_log_std_at_target: bool = False
    """false (holosoma): a fresh actor's log-std is the middle of [log_std_min, log_std_max] (-2.5) in every
    dim; true: the log-std head's bias starts each dim at the entropy target, log-std_j = target / action_dim
    - 0.5 log(2 pi e) - log b_j (the same noise in every dim of the recipe's action space)."""

    # --- critic ---
    num_q: int = 2
    """Critic ensemble size."""
    use_cdq: bool = False
    """Clipped double-Q: every critic regresses onto the lowest target and the actor uses the minimum; false (as
    holosoma's FastSAC): each critic onto its own target network, the actor on the critics' mean."""
    distributional: bool = True
    """C51-style categorical critic instead of scalar Q regression."""
    v_min: float = -20.0
    """Lowest return atom of the distributional critic (match it to the task's return scale)."""
    v_max: float = 20.0
    """Highest return atom of the distributional critic."""
    num_atoms: int = 501
    """Number of return atoms of the distributional critic."""

    # --- entropy ---
    alpha_init: float = 0.001
    """Initial entropy temperature."""
    autotune_alpha: bool = True
    """Learn the temperature so that policy entropy tracks target_entropy."""
    target_entropy: float | None = None
    """Entropy target in the recipe's action space (b_j x the [-1, 1] action, see EnvSpec.action_bound);
    None means -action_dim * target_entropy_scale."""
    target_entropy_scale: float = 0.5
    """Default entropy target per action dimension (target = -action_dim * scale, holosoma's target_entropy_ratio)."""

    # --- performance (CUDA only; ignored on CPU) ---
    compile: bool = True
    """On CUDA: torch.compile the loss and policy functions and replay each update as CUDA graphs (captured after a
    few eager warm-up updates; a capture that fails says so once and training goes on eagerly); false: eager."""
    amp: bool = True
    """bf16 autocast for network forward passes when on CUDA."""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first inconsistent hyperparameter and its value."""
        check_fields(self, "algo.", (
            (("num_envs", "buffer_size", "batch_size", "n_steps", "num_updates", "policy_frequency", "num_q",
              "max_iterations", "max_nonfinite_updates"), lambda v: isinstance(v, int) and v >= 1, "a positive int"),
            # checked here, without torch: a typo (gpu) is refused before any process starts
            (("device",), lambda v: isinstance(v, str) and _DEVICE.fullmatch(v), "auto, cpu, cuda, cuda:N or mps"),
            (("learning_starts", "early_lr_env_steps"), lambda v: v >= 0, ">= 0"),
            (("gamma", "tau"), lambda v: 0.0 < v <= 1.0, "in (0, 1]"),
            (("adam_beta1", "adam_beta2"), lambda v: 0.0 <= v < 1.0, "in [0, 1)"),
            # comparisons that are false for NaN, so NaN fails too
            (("actor_lr", "critic_lr", "alpha_lr", "alpha_init"), lambda v: v > 0.0, "> 0"),
            (("early_lr",), lambda v: v is None or v > 0.0, "> 0 or null"),
            (("weight_decay", "max_grad_norm", "obs_norm_eps", "bc_weight"), lambda v: v >= 0.0, ">= 0"),
            (("actor_hidden_dims", "critic_hidden_dims"), lambda v: len(v) > 0 and all(int(d) >= 1 for d in v),
             "a non-empty list of positive ints"),
            (("activation",), lambda v: v in ("silu", "relu", "elu", "tanh"), "silu/relu/elu/tanh"),
        ))
        if self.n_steps > self.buffer_size:
            raise ValueError(f"algo.n_steps ({self.n_steps}) exceeds buffer_size ({self.buffer_size})")
        if self.log_std_min >= self.log_std_max:
            raise ValueError(f"algo.log_std_min ({self.log_std_min}) must be < log_std_max ({self.log_std_max})")
        if self.distributional:
            check_fields(self, "algo.", ((("num_atoms",), lambda v: v >= 2, ">= 2"),))
            if self.v_min >= self.v_max:
                raise ValueError(f"algo.v_min ({self.v_min}) must be < v_max ({self.v_max})")

    def resolved_target_entropy(self, action_dim: int) -> float:
        """Entropy target for an action space of ``action_dim`` dimensions."""
        if self.target_entropy is not None:
            return float(self.target_entropy)
        return -float(action_dim) * self.target_entropy_scale

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> SACConfig:
        """Build from a plain mapping (e.g. a Hydra/OmegaConf ``algo`` node); unknown keys and values of the
        wrong type raise ValueError naming the key, so a typo in an override is never ignored."""
        return build_dataclass(cls, values, "algo")

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict copy (for checkpoints and logging)."""
        return dataclasses.asdict(self)
