"""Read a clip in one format and write it in another: what ``unilab-assets import-clip`` and ``export-clip`` run.

Source -> checked :class:`Clip` on the model -> resampled to the target rate -> velocities by finite differences where
the source had none -> written to a temporary file next to the target, which an npz target must load in the motion
loader, then renamed into place (an interrupted or refused conversion leaves no partial file).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import mujoco

from unilab.motion_io.clip import Clip, ClipError, MotionFileError, check_fps, clip_frame_counts
from unilab.motion_io.csv_format import read_csv, write_csv
from unilab.motion_io.formats import FORMATS, REF_BODY, Format
from unilab.motion_io.kinematics import resample, with_velocities
from unilab.motion_io.npz_format import read_npz, write_npz
from unilab.motion_io.onnx_format import read_onnx, reference_body_id, write_onnx


def format_of(path: Path, name: str | None = None) -> Format:
    """The format called ``name``, or the one ``path``'s suffix names."""
    for fmt in FORMATS:
        if (fmt.name == name) if name else (path.suffix.lower() == fmt.suffix):
            return fmt
    known = ", ".join(f"{f.suffix} ({f.what})" for f in FORMATS)
    raise ClipError(f"{path}: unknown clip format {name or path.suffix!r}; known: {known}")


def read_clip(path: Path, model: mujoco.MjModel, fmt: Format, fps: float | None = None, ref_body: str = REF_BODY
              ) -> Clip:
    """The clip in ``path``; ``fps`` for a source that does not store its rate (default: the format's)."""
    if fmt.name == "npz":
        return read_npz(path, model, fps)
    rate = fmt.source_fps if fps is None else fps
    if fmt.name == "csv":
        return read_csv(path, model, rate)
    return read_onnx(path, model, rate, ref_body)


def _write(path: Path, clip: Clip, model: mujoco.MjModel, fmt: Format, ref_body: str) -> None:
    if fmt.name == "npz":
        write_npz(path, clip, model)
    elif fmt.name == "csv":
        write_csv(path, clip)
    else:
        write_onnx(path, clip, model, ref_body)


def check_target(out: Path, force: bool) -> None:
    """Refuse a target that exists (unless ``force``) or whose folder is missing or not writable."""
    if out.is_dir():
        raise ClipError(f"{out}: is a directory; give the file to write")
    if out.exists() and not force:
        raise ClipError(f"{out}: exists; pass --force to replace it")
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise ClipError(f"{out}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise ClipError(f"{out}: folder {folder} is not writable")


def write_clip(out: Path, clip: Clip, model: mujoco.MjModel, fmt: Format, ref_body: str = REF_BODY) -> None:
    """Write ``clip`` (with velocities) to ``out`` atomically; an npz must load in the motion loader first."""
    tmp = out.with_name(f".{out.stem}.tmp-{os.getpid()}{out.suffix}")
    try:
        _write(tmp, clip, model, fmt, ref_body)
        if fmt.name == "npz":
            try:
                clip_frame_counts([tmp], 1.0 / clip.fps)
            except MotionFileError as exc:
                raise ClipError(f"{out}: the motion loader refuses the converted clip: "
                                f"{str(exc).replace(str(tmp), out.name)}") from exc
        os.replace(tmp, out)
    except OSError as exc:
        raise ClipError(f"{out}: cannot write ({exc.strerror or exc})") from exc
    finally:
        tmp.unlink(missing_ok=True)


def convert(source: Path, out: Path, model: mujoco.MjModel, *, source_format: str | None = None,
            fps: float | None = None, out_fps: float | None = None, ref_body: str = REF_BODY, force: bool = False,
            progress: Callable[[str], None] | None = None) -> Clip:
    """Convert ``source`` into ``out`` (formats from the suffixes unless ``source_format``), resampled to
    ``out_fps`` (default: the target format's rate); returns the clip written."""
    say = progress or (lambda _msg: None)
    start = time.perf_counter()
    src_fmt, out_fmt = format_of(source, source_format), format_of(out)
    if out_fps is not None:
        out_fps = check_fps(out_fps, "--out-fps")
    if fps is not None:
        fps = check_fps(fps, "--fps")
    if source.resolve() == out.resolve():
        raise ClipError(f"{out}: is the source file; write to another file")
    check_target(out, force)
    if "onnx" in (src_fmt.name, out_fmt.name):
        reference_body_id(model, ref_body)
    say(f"reading {source} ({src_fmt.what})")
    clip = read_clip(source, model, src_fmt, fps, ref_body)
    rate = out_fmt.target_fps if out_fps is None else out_fps
    say(f"{clip.num_frames} frames at {clip.fps:g} fps ({(clip.num_frames - 1) / clip.fps:.1f} s), "
        f"{len(clip.joint_names)} joints" + ("" if rate == clip.fps else f"; resampling to {rate:g} fps"))
    clip = with_velocities(resample(clip, rate))
    say(f"writing {out} ({out_fmt.what}, {clip.num_frames} frames)")
    write_clip(out, clip, model, out_fmt, ref_body)
    say(f"done in {time.perf_counter() - start:.1f} s")
    return clip
