"""The clip file formats unilab converts between, and their frame-rate conventions (a table; no heavy imports, so
``unilab-assets --help`` stays fast)."""

from __future__ import annotations

from dataclasses import dataclass

POLICY_FPS = 50.0  # the G1 tasks' policy rate (control_dt 0.02 s): the rate our clips are written at
LAFAN1_FPS = 30.0  # the Unitree LAFAN1 retargeting's frame rate (its CSV files do not store it)
HOLOSOMA_POLICY_FPS = 50.0  # holosoma's G1 WBT policies step at 50 Hz, and their embedded clip with them
REF_BODY = "torso_link"  # the body whose pose holosoma's G1 WBT files embed


@dataclass(frozen=True)
class Format:
    """One clip file format: a row of :data:`FORMATS`."""

    name: str
    suffix: str
    what: str  # for --help and messages
    source_fps: float | None  # the rate of a source file of this kind, which does not store it (None: it does)
    target_fps: float  # the rate a file of this kind is written at unless told otherwise


FORMATS = (
    Format("npz", ".npz", "holosoma / BeyondMimic npz, our clip format", None, POLICY_FPS),
    Format("csv", ".csv", "Unitree LAFAN1-retargeted CSV", LAFAN1_FPS, LAFAN1_FPS),
    Format("onnx", ".onnx", "holosoma WBT ONNX with an embedded clip", HOLOSOMA_POLICY_FPS, HOLOSOMA_POLICY_FPS),
)
