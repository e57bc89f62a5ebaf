"""`train`: FastSAC training from the command line (Hydra overrides)."""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence

from omegaconf import OmegaConf

from unilab.cli.config import ConfigError, compose_config, help_text, split_argv, to_run_spec


def _terminate(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``train`` console script; returns the exit code."""
    from unilab.runtime.trainer import CollectorDied, Trainer, line_buffered_stdout  # noqa: PLC0415

    line_buffered_stdout()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        overrides, flags = split_argv(argv)
        cfg = compose_config(overrides)
        if flags["help"]:
            print(help_text(cfg))
            return 0
        if flags["cfg"]:
            print(OmegaConf.to_yaml(cfg))
            return 0
        spec = to_run_spec(cfg)
    except ConfigError as err:
        print(f"train: error: {err}", file=sys.stderr)
        return 2
    from unilab.runtime import distributed  # noqa: PLC0415

    # a scheduler's SIGTERM (timeout, SLURM, docker stop) stops like Ctrl-C: checkpoint, then exit
    signal.signal(signal.SIGTERM, _terminate)

    try:
        trainer = Trainer(spec)
        result = trainer.train()
    except CollectorDied as err:
        print(f"train: error: {err}", file=sys.stderr, flush=True)
        return 1
    except (FileNotFoundError, ValueError) as err:  # e.g. training.resume pointing nowhere
        print(f"train: error: {err}", file=sys.stderr, flush=True)
        return 2
    finally:
        distributed.shutdown()
    if trainer.dist.rank == 0 and not spec.training.no_play and result.checkpoint is not None:
        from unilab.runtime.play import play  # noqa: PLC0415

        try:
            play(result.checkpoint, num_envs=spec.training.play_num_envs, steps=spec.training.play_steps)
        except Exception as err:  # noqa: BLE001 - the trained model is saved; a video failure must not hide that
            print(f"train: play after training failed: {err} (checkpoint {result.checkpoint} is saved)", file=sys.stderr)
    return 130 if result.interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
