"""``task.KEY=VALUE`` arguments of ``play`` and ``unilab-eval``: changes to a checkpoint's stored task config."""

from __future__ import annotations

from collections.abc import Sequence

HELP = ("task config changes as task.KEY=VALUE (YAML values), applied to the checkpoint's stored config, "
        "e.g. task.motion_files=[/new/place/clip.npz] or task.robot.model_xml=/new/place/robot.xml when files moved")


def parse_override(token: str) -> tuple[str, object]:
    """``("task.KEY", value)`` of one ``task.KEY=VALUE`` token; ValueError naming a malformed one."""
    import yaml  # lazy: only overrides need it

    key, eq, value = token.partition("=")
    if not eq or not key.startswith("task.") or key == "task.":
        raise ValueError(f"override {token!r} must look like task.KEY=VALUE")
    try:
        return key, yaml.safe_load(value) if value else None
    except yaml.YAMLError as err:
        raise ValueError(f"override {token!r}: the value is not YAML ({err.__class__.__name__})") from err


def split_targets(targets: Sequence[str]) -> tuple[str | None, dict[str, object]]:
    """``(checkpoint or None, {dotted key: value})`` from positional arguments; ValueError naming a bad one."""
    checkpoint, overrides = None, {}
    for tok in targets:
        if "=" in tok:
            key, value = parse_override(tok)
            overrides[key] = value
        elif checkpoint is None:
            checkpoint = tok
        else:
            raise ValueError(f"one RUN_DIR_OR_CHECKPOINT at most, got {checkpoint!r} and {tok!r}")
    return checkpoint, overrides
