"""`train`: FastSAC training from the command line (Hydra overrides)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from omegaconf import OmegaConf

from unilab.cli import run_cli
from unilab.cli.config import (
    ConfigError,
    choose_recipe,
    compose_config,
    explicit_algo_keys,
    help_text,
    recipe_name,
    split_argv,
    to_run_spec,
)
from unilab.runtime import console
from unilab.runtime.signals import StopSignals

# a resumed run takes the algo keys not named on the command line from its checkpoint (to_run_spec),
# so the printed algo block is not what it will train with
RESUME_CFG_NOTE = ("# training.resume is set: the algo keys not given on the command line (given: {keys}) "
                   "come from the checkpoint, not from the algo block above")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``train`` console script; returns the exit code."""
    # Ctrl-C while torch or the env loads: nothing started, nothing to save
    return run_cli("train", _main, argv, interrupted="interrupted before training started")


def _main(argv: Sequence[str] | None) -> int:
    console.guard("train", later="the run directory's console.log")
    argv = list(sys.argv[1:] if argv is None else argv)
    try:  # the whole config is validated here, before torch is imported or anything starts
        overrides, flags = split_argv(argv)
        # no --algo: the GPU recipe with a CUDA device, else the CPU one (probed without torch)
        composed, recipe = choose_recipe(overrides)
        cfg = compose_config(composed)
        if flags["help"]:
            print(help_text(cfg, values_from=recipe))
            return 0
        if flags["cfg"]:
            print(OmegaConf.to_yaml(cfg), end="")
            if cfg.training.resume:
                print(RESUME_CFG_NOTE.format(keys=", ".join(explicit_algo_keys(overrides) or ()) or "none"))
            return 0
        spec = to_run_spec(cfg, explicit_algo_keys(overrides))
        spec.recipe = recipe_name(composed)
    except ConfigError as err:
        print(f"train: error: {err}", file=sys.stderr)
        return 2
    if os.environ.get("RANK", "0") == "0":  # torchrun: one banner
        print(recipe, flush=True)
    # until the trainer's own handlers take over, SIGTERM and SIGHUP stop the start-up as Ctrl-C does: one line, the
    # collector stopped and the empty run directory removed (exit 128 + signal), not a silent death that leaves both
    with StopSignals():
        # imported here, not at the top: --help, --cfg and a config error (exit 2) never load torch
        from unilab.runtime import distributed
        from unilab.runtime.checkpoint import CheckpointWriteError
        from unilab.runtime.collector_client import CollectorStartupError
        from unilab.runtime.metrics import TrainingDiverged
        from unilab.runtime.trainer import CollectorDied, NonFiniteTraining, Trainer, line_buffered_stdout

        line_buffered_stdout()

        try:
            trainer = Trainer(spec)
            result = trainer.train()
        except (CollectorDied, TrainingDiverged, NonFiniteTraining, distributed.RankLost, CheckpointWriteError) as err:
            # CollectorStartupError (a CollectorDied): the env could not be built, a config or asset problem (exit 2);
            # CheckpointWriteError: the final checkpoint could not be written (disk full, read-only)
            print(f"train: error: {err}", file=sys.stderr, flush=True)
            return 2 if isinstance(err, CollectorStartupError) else 1
        except (FileNotFoundError, ValueError) as err:  # e.g. training.resume pointing nowhere
            print(f"train: error: {err}", file=sys.stderr, flush=True)
            return 2
        except MemoryError as err:  # the replay buffer's own size check (algo.buffer_size x algo.num_envs)
            print(f"train: error: {str(err) or 'out of memory building the learner'}", file=sys.stderr, flush=True)
            return 2
        finally:
            distributed.shutdown()
    if trainer.dist.rank == 0 and not spec.training.no_play and result.checkpoint is not None:
        from unilab.runtime.play import play  # lazy: only when play follows training

        try:
            play(result.checkpoint, num_envs=spec.training.play_num_envs, steps=spec.training.play_steps)
        except Exception as err:  # noqa: BLE001 - the trained model is saved; a video failure must not hide that
            print(f"train: play after training failed: {err} (checkpoint {result.checkpoint} is saved)",
                  file=sys.stderr)
        except KeyboardInterrupt:
            print(f"\ntrain: play after training interrupted (checkpoint {result.checkpoint} is saved)",
                  file=sys.stderr, flush=True)
            return 130
    # Ctrl-C 130, SIGTERM (timeout, SLURM, docker stop) 143, SIGHUP (terminal closed) 129: after a final checkpoint
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
