"""holosoma 0.0.3's own FastSAC learner training unilab's ``g1_motion_tracking`` env: the reference curve.

``FastSACAgent.setup()`` and ``learn()`` run unchanged from holosoma's wheel; a thin view gives them what they
read of an env (observation dims, action bounds, ``reset_all``, ``step``). holosoma's actor outputs
``tanh(u) * b_j``; the view divides by ``b_j`` (``env.action_bound``), so unilab's env receives exactly the
[-1, 1] action its own learner would send, and the bounds holosoma computes equal unilab's.

The learner's numbers are holosoma's own ``g1_29dof_wbt_fast_sac`` config, read from the wheel (gamma 0.99, tau
0.05, actor every 2nd update, target entropy ratio 0.5, alpha 0.001 at the start, zero actor heads: log-std
-2.5), at the sizes of unilab's ``sac_cpu`` recipe (256 envs, batch 1024, 2 updates, 101 atoms, width 256,
replay 512 per env), on one CPU thread. The JSON has ``unilab-bench learn``'s ``series`` keys (training episode
length every 10 iterations, the mean of the episodes that ended in them), so its curves compare with a ``learn`` run's.

holosoma's agent needs packages unilab does not (tensordict, loguru, tqdm, tyro, trimesh, wandb, rich); keep
them out of unilab's environment:

    python -m venv --system-site-packages /tmp/holovenv
    /tmp/holovenv/bin/pip install tensordict loguru tqdm tyro trimesh wandb rich
    python -m zipfile -e ~/.cache/unilab/downloads/holosoma-0.0.3-py3-none-any.whl /tmp/holo
    /tmp/holovenv/bin/python scripts/reference/holosoma_fast_sac.py --holosoma /tmp/holo --seed 0 \\
        --env-steps 300032 --cpu 0 --out /tmp/holosoma_s0.json
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from unilab.bench.compare import RUN_KEYS, compare_table, plot_runs
from unilab.bench.evaluation import RANDOM_START_ENVS, add_checkpoints
from unilab.cli.config import compose_config
from unilab.runtime.config import SimConfig
from unilab.sim.spec import FINAL
from unilab.tasks.g1_motion_tracking.evaluation import eval_task_config, random_start_metrics
from unilab.tasks.registry import make_env, task_config

CPU_RECIPE = "sac_cpu"
"""The unilab recipe whose sizes (envs, batch, replay, updates, atoms, widths) holosoma's learner runs at."""
LOG_INTERVAL = 10
"""Iterations per point of the episode-length series, as unilab's ``training.log_interval``."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--holosoma", required=True, help="folder holding the extracted holosoma wheel (its holosoma/)")
    p.add_argument("--seed", type=int, default=0, help="seed of torch and of the env (as unilab's training.seed)")
    p.add_argument("--env-steps", type=int, default=300_032, help="env steps to train (rounded up to iterations)")
    p.add_argument("--cpu", type=int, default=None, help="pin the process (physics and learner) to this CPU")
    p.add_argument("--out", required=True, help="JSON to write: the series and the run's numbers")
    p.add_argument("--log-dir", default=None, help="holosoma's TensorBoard folder (default: next to --out)")
    p.add_argument("--add-to", default=None, metavar="LEARN_JSON",
                   help="also add this run (arm holosoma_learner) to a unilab-bench learn comparison JSON and "
                        "redraw its PNG: both learners' curves at equal env steps in one table and plot")
    p.add_argument("--evaluate", default=None, metavar="CHECKPOINT",
                   help="skip training: evaluate this run's final.pt and add the numbers to --out")
    p.add_argument("--random-episodes", type=int, default=128,
                   help="then evaluate the deterministic policy from training's random starts, as "
                        "unilab-eval --starts random (64 envs, no observation noise); 0: skip")
    return p


class EnvView:
    """What holosoma's ``FastSACEnv``/``FastSACAgent`` read of an env, backed by a unilab ``VecEnv``."""

    def __init__(self, env: Any):
        self.env = env
        self.num_envs, self.device = env.num_envs, "cpu"
        b = env.action_bound.astype("float64")
        self.bound = torch.as_tensor(env.action_bound, dtype=torch.float32)
        # holosoma's bound: max(|lo - q0|, |hi - q0|) / action_scale; these limits make it equal unilab's b_j
        self.robot_config = SimpleNamespace(
            actions_dim=env.action_dim, dof_names=[f"joint_{j}" for j in range(env.action_dim)],
            dof_pos_lower_limit_list=(-0.25 * b).tolist(), dof_pos_upper_limit_list=(0.25 * b).tolist(),
            init_state=SimpleNamespace(default_joint_angles={}), control=SimpleNamespace(action_scale=0.25))
        dims = {"actor_obs": env.obs_dim, "critic_obs": env.critic_obs_dim}
        self.observation_manager = SimpleNamespace(get_obs_dims=lambda: dims, cfg=SimpleNamespace(groups={}))
        self.out = env.buffers()
        self.length = np.zeros(env.num_envs, dtype=np.int64)
        self.ended: list[int] = []
        self.env_steps = 0

    def _obs(self, prefix: str = "") -> dict[str, Any]:
        return {"actor_obs": torch.from_numpy(self.out[prefix + "obs"].copy()),
                "critic_obs": torch.from_numpy(self.out[prefix + "critic_obs"].copy())}

    def reset_all(self) -> dict[str, Any]:
        self.env.reset(out=self.out)
        return self._obs()

    def step(self, actions: dict[str, Any]) -> tuple[Any, Any, Any, dict[str, Any]]:
        a = (actions["actions"] / self.bound).clamp(-1.0, 1.0).numpy()
        self.env.step(a, out=self.out)
        self.env_steps += self.num_envs
        term, trunc = self.out["terminated"], self.out["truncated"]
        done = term | trunc
        self.length += 1
        self.ended.extend(self.length[done].tolist())
        self.length[done] = 0
        info = {"time_outs": torch.from_numpy(trunc.astype("int64")), "final_observations": self._obs(FINAL),
                "episode": {}, "episode_all": {}, "to_log": {}}
        return self._obs(), torch.from_numpy(self.out["reward"].copy()), torch.from_numpy(done.astype("int64")), info


class Log:
    """Stands in for holosoma's ``LoggingHelper``: keeps unilab's series and the learner's scalars."""

    def __init__(self, view: EnvView, wall0: float):
        self.view, self.wall0 = view, wall0
        self.series: dict[str, list[float]] = {"env_steps": [], "episode_length": [], "wall_s": []}
        self.scalars: list[dict[str, float]] = []
        self.iteration = 0

    def record_collection_time(self) -> Any:
        return contextlib.nullcontext()

    record_learn_time = record_collection_time

    def update_episode_stats(self, rewards: Any, dones: Any, infos: Any) -> None:
        self.iteration += 1
        if self.iteration % LOG_INTERVAL == 0 and self.view.ended:
            v = self.view
            self.series["env_steps"].append(v.env_steps)
            self.series["episode_length"].append(sum(v.ended) / len(v.ended))
            self.series["wall_s"].append(time.perf_counter() - self.wall0)
            v.ended.clear()
            if len(self.series["env_steps"]) % 20 == 0:
                print(f"env steps {v.env_steps}: episode length {self.series['episode_length'][-1]:.1f}", flush=True)

    def post_epoch_logging(self, it: int, loss_dict: dict[str, float], extra_log_dicts: Any = None) -> None:
        self.scalars.append({"iteration": it, "env_steps": self.view.env_steps, **loss_dict})


def random_start_eval(agent: Any, view: EnvView, episodes: int) -> dict[str, float]:
    """``unilab-eval --starts random``'s numbers for holosoma's deterministic actor (its tanh mean / b_j)."""
    cfg = eval_task_config({"name": "g1_motion_tracking"}, randomization=False, start_noise=True)
    env = make_env("g1_motion_tracking", cfg, min(RANDOM_START_ENVS, episodes),
                   pool_kwargs=SimConfig().pool_kwargs(), seed=0)
    agent.actor.eval()
    agent.obs_normalizer.eval()

    def act(obs: dict[str, Any]) -> Any:
        with torch.no_grad():
            x = agent.obs_normalizer(torch.from_numpy(obs["obs"]), update=False)
            return (agent.actor.explore(x, deterministic=True) / view.bound).numpy()

    try:
        return random_start_metrics(env, act, episodes)
    finally:
        env.close()


def add_to_comparison(report_path: Path, run: dict[str, Any]) -> None:
    """Put ``run`` (this script's JSON) into a ``unilab-bench learn`` comparison as arm holosoma_learner."""
    report = json.loads(report_path.read_text())
    arm = "holosoma_learner"
    entry = dict.fromkeys(RUN_KEYS)
    entry.update(arm=arm, seed=run["seed"], overrides=[], num_envs=run["num_envs"],
                 num_updates=run["config"]["num_updates"], iterations=run["iterations"], env_steps=run["env_steps"],
                 train_wall_s=run["wall_s"], steps_per_sec=run["steps_per_sec"], checkpoint=run["checkpoint"],
                 command=["scripts/reference/holosoma_fast_sac.py", "--seed", str(run["seed"])],
                 series={"env_steps": run["series"]["env_steps"], "episode_length": run["series"]["episode_length"],
                         "return_env_steps": [], "return": []},
                 eval={}, eval_random_starts=run["eval_random_starts"])  # no clip evaluation: not a unilab checkpoint
    report["runs"] = [r for r in report["runs"] if (r["arm"], r["seed"]) != (arm, run["seed"])] + [entry]
    if arm not in [a["name"] for a in report["arms"]]:
        report["arms"].append({"name": arm, "overrides": [], "src": "holosoma 0.0.3 wheel"})
    if run["seed"] not in report["seeds"]:
        report["seeds"].append(run["seed"])
    add_checkpoints(report["runs"], report["env_steps_budget"])
    if report.get("plot"):
        plot_runs(report, Path(report["plot"]))
    report_path.write_text(json.dumps(report, indent=1))
    print(compare_table(report))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    root = Path(args.holosoma)
    if not (root / "holosoma" / "agents" / "fast_sac" / "fast_sac_agent.py").is_file():
        sys.exit(f"--holosoma {root}: no holosoma/agents/fast_sac/fast_sac_agent.py there (extract the wheel)")
    sys.path.insert(0, str(root))
    FastSACAgent = importlib.import_module("holosoma.agents.fast_sac.fast_sac_agent").FastSACAgent
    experiment = importlib.import_module("holosoma.config_values.wbt.g1.experiment").g1_29dof_wbt_fast_sac
    sizes = compose_config([f"algo={CPU_RECIPE}"]).algo
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    num_envs = int(sizes.num_envs)
    env = make_env("g1_motion_tracking", task_config("g1_motion_tracking", {}), num_envs,
                   pool_kwargs=SimConfig(cpu_ids=None if args.cpu is None else [args.cpu]).pool_kwargs(),
                   seed=args.seed)
    view = EnvView(env)
    iterations = -(-args.env_steps // num_envs)
    # holosoma's own G1 WBT FastSAC config, at the CPU recipe's sizes (its networks are width w, w/2, w/4)
    cfg = dataclasses.replace(
        experiment.algo.config, num_learning_iterations=iterations - 1, compile=False, amp=False, save_interval=0,
        logging_interval=LOG_INTERVAL, batch_size=int(sizes.batch_size), buffer_size=int(sizes.buffer_size),
        num_updates=int(sizes.num_updates), num_atoms=int(sizes.num_atoms),
        actor_hidden_dim=int(sizes.actor_hidden_dims[0]), critic_hidden_dim=int(sizes.critic_hidden_dims[0]))
    out = Path(args.out)
    log_dir = args.log_dir or str(out.with_suffix("")) + "_tb"
    agent = FastSACAgent(view, cfg, "cpu", log_dir)  # type: ignore[arg-type]
    agent.setup()
    if args.evaluate:
        state = torch.load(args.evaluate, weights_only=True)
        agent.actor.load_state_dict(state["actor"])
        agent.obs_normalizer.load_state_dict(state["obs_normalizer"])
        env.close()
        report = json.loads(out.read_text())
        report["eval_random_starts"] = random_start_eval(agent, view, args.random_episodes)
        out.write_text(json.dumps(report, indent=1))
        print(f"deterministic, random starts: {report['eval_random_starts']}")
        if args.add_to:
            add_to_comparison(Path(args.add_to), report)
        return 0
    wall0 = time.perf_counter()
    log = Log(view, wall0)
    agent.logging_helper = log  # type: ignore[assignment]
    final = Path(log_dir) / "final.pt"
    # the actor and its observation normaliser are all the evaluation needs (holosoma's own save also writes
    # the env's state and an ONNX export, which need holosoma's env)
    agent.save = lambda path: torch.save({"actor": agent.actor.state_dict(),  # type: ignore[method-assign]
                                          "obs_normalizer": agent.obs_normalizer.state_dict()}, final)
    agent.export = lambda onnx_file_path: None  # type: ignore[method-assign]
    agent.learn()
    wall = time.perf_counter() - wall0
    env.close()
    evaluation = random_start_eval(agent, view, args.random_episodes) if args.random_episodes else None
    report = {"reference": "holosoma 0.0.3 FastSACAgent (setup, learn) on unilab g1_motion_tracking",
              "seed": args.seed, "num_envs": num_envs, "iterations": iterations, "env_steps": view.env_steps,
              "wall_s": wall, "steps_per_sec": view.env_steps / wall, "config": dataclasses.asdict(cfg),
              "series": log.series, "eval_random_starts": evaluation, "learner_scalars": log.scalars,
              "checkpoint": str(final)}
    out.write_text(json.dumps(report, indent=1))
    if args.add_to:
        add_to_comparison(Path(args.add_to), report)
    print(f"{view.env_steps} env steps in {wall:.0f} s; JSON {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
