"""``unilab-eval --onnx FILE`` / ``play --onnx FILE``: a holosoma-format ONNX policy (:mod:`unilab.interop`) in a
unilab env.

The task is the registry task of the file's kind (tracking: motion_tracking, locomotion: locomotion) whose robot has
exactly the file's ``dof_names`` as its joints, or the one ``--task`` names (checked the same way); its pieces must
carry the file's terms. Its config is the task's defaults with the file's ``kp`` / ``kd`` per joint name and, for a
tracking file, the file's embedded clip (:func:`unilab.motion_io.onnx_format.read_onnx`: the root recovered from the
reference body's pose by forward kinematics on the task's model; written to ``$UNILAB_CACHE/holosoma_clips/``) unless
``--clip`` names another. Each step the policy sees the file's observation assembled from the env's pieces
(:class:`~unilab.interop.holosoma_terms.HolosomaObservation`) and its output becomes the env action that commands
holosoma's PD targets (:class:`~unilab.interop.holosoma_actions.HolosomaActions`).

Conventions the env keeps (holosoma_inference differs; the effect is small and zero where noted):

- reference timing: the observation shows the clip frame the next step is scored against (frame n+1 at state n);
  holosoma_inference shows the frame its previous inference returned (frame n-1);
- start yaw: none removed; holosoma_inference removes the robot's and the clip's yaw at the start, equal here as
  the env starts on the reference;
- action clip: holosoma clips the output at 100 units and nothing else; a unilab env clips its action at its bound
  (``action_scale_j`` from the default). By default (``action_clip="holosoma"``) the env's actuation is set to a
  single range of :data:`IMPORT_TARGET_RANGE` rad that no clipped output reaches, so only holosoma's clip acts;
  ``action_clip="env"`` keeps the task's bound, and the report counts the entries it cut (``beyond_bound_*``).
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from unilab.assets.holosoma_inference import published_policy
from unilab.cache import cache_dir
from unilab.interop.holosoma_actions import HolosomaActions
from unilab.interop.holosoma_onnx import TASK_KINDS, PolicyFile, read_policy_file, session
from unilab.interop.holosoma_terms import (
    HolosomaObservation,
    file_term_names,
    file_terms,
    missing_terms,
    piece_widths,
    task_terms,
)
from unilab.runtime.checkpoint import apply_task_overrides
from unilab.tasks import registry
from unilab.tasks.registry import task_config

IMPORT_TARGET_RANGE = 1000.0
"""rad: the env's action range under holosoma's clip (``|s_j u_j| <= 100 s_j``, tens of rad at most for the G1)."""
ACTION_CLIPS = ("holosoma", "env")


def resolve_file(onnx: str) -> Path:
    """``onnx`` as a path, or the cached file of a published policy of that name (fetched on first use)."""
    path = Path(onnx).expanduser()
    if path.is_file() or path.suffix == ".onnx" or "/" in onnx:
        if not path.is_file():
            raise FileNotFoundError(f"--onnx {onnx}: no such file")
        return path
    return published_policy(onnx)


@dataclass
class ClipCounter:
    """How often the env clipped the file's actions at its bound (entries and steps with any)."""

    entries: int = 0
    total: int = 0
    steps_with_any: int = 0
    steps: int = 0

    def add(self, beyond: np.ndarray) -> None:
        self.entries += int(beyond.sum())
        self.total += int(beyond.size)
        self.steps_with_any += int(beyond.any(axis=1).sum())
        self.steps += int(beyond.shape[0])

    def summary(self) -> dict[str, float]:
        return {"beyond_bound_entries": self.entries / max(self.total, 1),
                "beyond_bound_env_steps": self.steps_with_any / max(self.steps, 1)}


@dataclass
class OnnxSource:
    """A holosoma-format file ready to run: its task, the run config its env is built from, and its policy."""

    policy: PolicyFile
    task: str
    raw: dict[str, Any]
    """``{"task": {...}}``: the task config (mapping) of the evaluation."""
    clip: Path | None
    threads: int = 1
    action_clip: str = "holosoma"
    clipped: ClipCounter = dataclasses.field(default_factory=ClipCounter)
    mapping: HolosomaActions | None = None
    """The action mapping of the last env :meth:`make_policy` served."""

    @property
    def path(self) -> Path:
        return self.policy.path

    def make_policy(self, env: Any):
        """The file's policy on ``env``: env observations -> env actions (``unilab.eval.rollout.PolicyFn``)."""
        p = self.policy
        sess = session(p.path, self.threads)
        out_name = sess.get_outputs()[0].name if p.kind == "loco" else "actions"
        table = task_terms(self.task)
        actions = self.mapping = HolosomaActions.for_env(p, env)
        observe = HolosomaObservation(env, file_terms(p, piece_widths(env, table)), table, p.dof_names,
                                      actions.piece_to_output())
        counter = self.clipped

        def act(obs: dict[str, np.ndarray]) -> np.ndarray:
            feed = {p.obs_name: observe(obs["critic_obs"], env.book.lengths == 0)}
            if p.kind == "wbt":  # the frame the observation shows; the file's own clip outputs are not read
                feed["time_step"] = (np.asarray(env.frame) + 1).astype(np.float32)[:, None]
            u = sess.run([out_name], feed)[0]
            counter.add(actions.beyond_bound(u))
            return actions.to_env(u)

        return act

    def describe(self) -> dict[str, Any]:
        """What the report records of the file and its conventions."""
        return {"onnx": str(self.policy.path), "kind": self.policy.kind, "task": self.task,
                "terms": file_term_names(self.policy), "clip": None if self.clip is None else str(self.clip),
                "action_clip": self.action_clip,
                "action_scale_source": None if self.mapping is None else self.mapping.source,
                "action_scale": None if self.mapping is None else [float(v) for v in self.mapping.scale],
                **self.clipped.summary()}


def prepare(onnx: str, task: str | None = None, clip: str | None = None,
            overrides: dict[str, Any] | None = None, threads: int | None = None,
            action_clip: str = "holosoma") -> OnnxSource:
    """The :class:`OnnxSource` of ``onnx`` (a file or a published name); ``task``: the task to run it in (default:
    :func:`choose_task`'s); ``clip``: a tracking file's clip (default: its embedded one);
    ``overrides``: ``task.KEY=VALUE`` changes on top; ``action_clip``: one of :data:`ACTION_CLIPS` (module doc)."""
    if action_clip not in ACTION_CLIPS:
        raise ValueError(f"--action-clip must be one of {', '.join(ACTION_CLIPS)}, got {action_clip!r}")
    policy = read_policy_file(resolve_file(onnx))
    name = choose_task(policy, task, overrides)
    task_raw: dict[str, Any] = {"name": name}
    if action_clip == "holosoma":
        task_raw.update(action_scale_mode="radians", action_scale=IMPORT_TARGET_RANGE,
                        action_bound_from_joint_range=False)
    gains = {key: {joint: float(v) for joint, v in zip(policy.dof_names, getattr(policy, key), strict=True)}
             for key in ("kp", "kd") if getattr(policy, key) is not None}
    if gains:
        task_raw["robot"] = gains
    clip_path = None
    if policy.kind == "wbt":
        if clip is not None:
            clip_path = Path(clip).expanduser()
            if not clip_path.is_file():
                raise FileNotFoundError(f"--clip {clip}: no such file")
        else:
            clip_path = _embedded_clip(policy, task_config(name, apply_task_overrides(task_raw, overrides)))
        task_raw["motion_files"] = [str(clip_path)]
    elif clip is not None:
        raise ValueError(f"--clip: {policy.path} is a locomotion policy (it tracks no clip)")
    raw = {"task": apply_task_overrides(task_raw, overrides)}
    task_config(name, raw["task"])  # a bad override fails here, naming its key
    return OnnxSource(policy, name, raw, clip_path, threads or 1, action_clip)


def robot_joints(task: str, overrides: dict[str, Any] | None = None) -> list[str]:
    """The joints of task ``task``'s robot (its model's, base excluded), with ``task.KEY=VALUE`` ``overrides``."""
    from unilab.motion_io.clip import model_joint_layout  # noqa: PLC0415
    from unilab.tasks.core.model import load_task_model  # noqa: PLC0415 - mujoco only once a file is read

    cfg = task_config(task, apply_task_overrides({"name": task}, overrides))
    return model_joint_layout(load_task_model(cfg))[0]


def choose_task(policy: PolicyFile, task: str | None = None, overrides: dict[str, Any] | None = None) -> str:
    """The task that runs ``policy``: ``task`` if given, else the registry task of the file's kind whose robot's joints
    are the file's ``dof_names``; ValueError naming the file, the joints or the terms that do not fit."""
    kind = TASK_KINDS[policy.kind]
    names = set(policy.dof_names)
    if task is not None:
        if registry.kind(task) != kind:
            raise ValueError(f"--task {task} is a {registry.kind(task)} task; {policy.path.name} is a {kind} policy "
                             f"(tasks: {', '.join(registry.tasks_of_kind(kind))})")
        joints = robot_joints(task, overrides)
        if set(joints) != names:
            raise ValueError(f"--task {task}: its robot's joints are not {policy.path.name}'s dof_names: "
                             f"{_difference(policy.dof_names, joints)}")
    else:
        fits = [t for t in registry.tasks_of_kind(kind) if set(robot_joints(t, overrides)) == names]
        if len(fits) != 1:
            raise ValueError(f"{policy.path.name}: " + (
                f"no {kind} task's robot has its {len(names)} joints ({_listed(policy.dof_names)})" if not fits
                else f"the {kind} tasks {fits} all have its joints; pass --task"))
        task = fits[0]
    missing = missing_terms(file_term_names(policy), task)
    if missing:
        raise ValueError(f"{policy.path.name}: task {task} has no piece for its holosoma term(s) {missing}")
    return task


def _listed(names: list[str], most: int = 4) -> str:
    return ", ".join(names[:most]) + (f", ... ({len(names)} in all)" if len(names) > most else "")


def _difference(file_joints: list[str], robot_joints: list[str]) -> str:
    """What differs between the file's joints and a robot's, a few names of each side."""
    only_file = [n for n in file_joints if n not in robot_joints]
    only_robot = [n for n in robot_joints if n not in file_joints]
    return "; ".join(f"{what}: {_listed(names)}" for what, names in (
        ("only in the file", only_file), ("only in the robot", only_robot)) if names) or "repeated names"


def _embedded_clip(policy: PolicyFile, cfg: Any) -> Path:
    """The file's clip as a unilab npz (the root recovered on ``cfg``'s model), cached by the file's content."""
    from unilab.motion_io.convert import format_of, write_clip  # noqa: PLC0415 - mujoco only when a clip is made
    from unilab.motion_io.onnx_format import read_onnx  # noqa: PLC0415
    from unilab.tasks.core.model import load_task_model  # noqa: PLC0415

    ref_body = policy.reference_body or cfg.anchor_body
    if ref_body != cfg.anchor_body:
        raise ValueError(f"{policy.path}: its reference body is {ref_body!r}, the task's anchor {cfg.anchor_body!r} "
                         f"(pass task.anchor_body={ref_body})")
    model = load_task_model(cfg)
    digest = hashlib.sha256(policy.path.read_bytes()).hexdigest()[:12]
    out = cache_dir() / "holosoma_clips" / f"{policy.path.stem}-{digest}.npz"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_clip(out, read_onnx(policy.path, model, policy.policy_fps, ref_body), model, format_of(out))
    return out
