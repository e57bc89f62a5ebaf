"""Fetch, verify and cache the robot models and motion clips shipped in the holosoma wheel.

The Apache-2.0 wheel ``holosoma==0.0.3`` carries the Unitree G1 29-DoF and Booster T1 29-DoF MJCFs (with meshes; the
G1's with scenes) and whole-body-tracking clips in the BeyondMimic npz layout. unilab never installs holosoma: it
downloads the wheel with the user's own ``pip`` (so the user's index configuration applies), checks its sha256, and
extracts only the robot and motion paths, plus unilab's own scene for the T1 (its MJCF has no floor)::

    <cache>/holosoma-0.0.3/
        manifest.json                        # relative path -> size, sha256
        robots/g1/g1_29dof.xml, scenes/, meshes/
        robots/t1/t1_29dof.xml, meshes/, scene_t1_29dof.xml (unilab's: the MJCF with a floor)
        motions/g1_29dof/whole_body_tracking/*.npz
    <cache>/downloads/holosoma-0.0.3-py3-none-any.whl

Every load checks the files' sizes against the manifest; ``verify`` re-hashes everything. A missing, partial or corrupt
cache is rebuilt from the wheel, extracted into a temporary directory renamed into place (an interrupted fetch never
leaves a half-written cache).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from tqdm import tqdm

from unilab import cache as unilab_cache

HOLOSOMA_VERSION = "0.0.3"
WHEEL_NAME = f"holosoma-{HOLOSOMA_VERSION}-py3-none-any.whl"
WHEEL_SHA256 = "1c007c27dbf130c04533af6052649d88da32eaa9b54e69c6d39009e979a2312f"
WHEEL_ENV_VAR = "UNILAB_HOLOSOMA_WHEEL"

# Paths inside the wheel that unilab needs, and the prefix stripped on extraction.
WHEEL_DATA_PREFIX = "holosoma/data/"
ROBOT_PREFIXES = ("holosoma/data/robots/g1/", "holosoma/data/robots/t1/")
MOTION_PREFIX = "holosoma/data/motions/g1_29dof/whole_body_tracking/"
SCENES = {"g1": "robots/g1/scenes/scene_g1_29dof_wbt_plane.xml", "t1": "robots/t1/scene_t1_29dof.xml"}
"""Each built-in robot's scene MJCF (the robot on a floor) in the cache: ``task.robot.asset`` names a row."""
URDFS = {"g1": "holosoma/data/robots/g1/g1_29dof.urdf", "t1": "holosoma/data/robots/t1/t1_29dof.urdf"}
"""Each built-in robot's URDF in the wheel (not extracted: holosoma_inference's tracking policy reads one from a
policy file's metadata)."""
UNILAB_FILES = {"robots/t1/scene_t1_29dof.xml": "scene_t1_29dof.xml"}
"""Files unilab adds to the cache (cache path -> file of ``unilab/assets/models``), hashed in the manifest like the
wheel's: the T1 MJCF has no floor, so its scene includes it next to a plane."""
MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = 1

_HASH_CHUNK = 1 << 20


class AssetError(RuntimeError):
    """The asset cache cannot be built or is not usable."""


class WheelDownloadError(AssetError):
    """Downloading the wheel failed (typically: no network or no index access)."""


@dataclass(frozen=True)
class FetchResult:
    """Where the assets live and whether this call had to (re)build them."""

    root: Path
    rebuilt: bool
    wheel: Path | None


def assets_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    """Directory holding the extracted holosoma assets (may not exist yet)."""
    base = Path(cache_dir).expanduser() if cache_dir is not None else unilab_cache.cache_dir()
    return base / f"holosoma-{HOLOSOMA_VERSION}"


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_HASH_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def is_wanted_member(name: str) -> bool:
    """True for wheel members unilab extracts: the robot trees and the tracking clips."""
    if name.endswith("/"):
        return False
    prefix = next((p for p in ROBOT_PREFIXES if name.startswith(p)), None)
    if prefix is not None:
        rest = name[len(prefix):]
        # the MJCF files and the scenes/meshes they reference; URDFs are not used
        return rest.startswith(("scenes/", "meshes/")) or ("/" not in rest and rest.endswith(".xml"))
    if name.startswith(MOTION_PREFIX):
        rest = name[len(MOTION_PREFIX):]
        return "/" not in rest and rest.endswith(".npz")
    return False


def read_manifest(root: Path) -> dict[str, dict] | None:
    """The manifest's file table, or None when it is missing or unreadable."""
    try:
        data = json.loads((root / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        return None
    files = data.get("files")
    return files if isinstance(files, dict) and files else None


def check_cache(root: Path, *, full: bool = False, required: Iterable[str] = SCENES.values()) -> list[str]:
    """Problems found in an extracted cache; empty means usable. Sizes only (a few stat calls, run on every load)
    unless ``full``, which also re-hashes every file. ``required``: paths the manifest must list (default: the robot
    assets' scenes)."""
    files = read_manifest(root)
    if files is None:
        return [f"{root / MANIFEST_NAME}: missing or unreadable manifest"]
    # a cache built before a robot was added lacks its scene: rebuilt once, a superset of the older one
    problems = [f"{root / rel}: not in the manifest" for rel in required if rel not in files]
    for rel, entry in files.items():
        path = root / rel
        try:
            size = path.stat().st_size
        except OSError:
            problems.append(f"{path}: missing")
            continue
        if size != entry.get("size"):
            problems.append(f"{path}: size {size} != expected {entry.get('size')}")
        elif full and sha256_file(path) != entry.get("sha256"):
            problems.append(f"{path}: sha256 mismatch")
    return problems


def pip_download(dest: Path, *, python: str | None = None, show_progress: bool | None = None,
                 package: str = "holosoma", version: str = HOLOSOMA_VERSION) -> Path:
    """Download the wheel of ``package==version`` (no dependencies; default: the holosoma wheel) into ``dest`` with
    ``python -m pip download``.

    A subprocess, so the user's pip configuration (index URL, proxy, certificates) applies. With ``show_progress``
    (None: when stderr is a TTY) pip's progress bar is shown on stderr; otherwise pip's output is captured and its
    last lines are quoted in the error.
    """
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [python or sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
           f"{package}=={version}", "-d", str(dest)]
    if show_progress is None:
        try:
            show_progress = sys.stderr.isatty()
        except (AttributeError, ValueError):  # no stderr, or a closed one
            show_progress = False
    try:
        if show_progress:
            # pip's stdout (where its progress bar goes) onto our stderr, so stdout stays clean
            proc = subprocess.run(cmd, stdout=sys.stderr.fileno(), text=True)
        else:
            proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as exc:
        raise WheelDownloadError(f"could not run pip: {exc}") from exc
    if proc.returncode != 0:
        out = (proc.stderr or proc.stdout or "") if not show_progress else "(pip's output is above)"
        tail = "\n".join(out.strip().splitlines()[-6:])
        raise WheelDownloadError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}):\n{tail}")
    found = sorted(dest.glob(f"{package.replace('-', '_')}-{version}-*.whl"))
    if not found:
        raise WheelDownloadError(f"pip reported success but no {package} wheel appeared in {dest}")
    return found[0]


@dataclass(frozen=True)
class PinnedWheel:
    """A wheel unilab unpacks (never installs): pip's ``package==version``, its file name and pinned sha256, the env
    var naming a pre-downloaded copy, and what it holds (for messages)."""

    package: str
    version: str
    name: str
    sha256: str
    env_var: str
    holds: str
    size: str
    fetch: str
    """The command that fetches it again (``unilab-assets fetch``)."""

    def url_hint(self) -> str:
        return f"https://pypi.org/project/{self.package}/{self.version}/#files"


HOLOSOMA_WHEEL = PinnedWheel("holosoma", HOLOSOMA_VERSION, WHEEL_NAME, WHEEL_SHA256, WHEEL_ENV_VAR,
                             "the robot assets", "~45 MB", "unilab-assets fetch")


def acquire_wheel(wheel: PinnedWheel, cache_dir: Path | None, downloader: Callable[[Path], Path] | None = None,
                  wheel_path: Path | None = None, progress: bool = True, expected_sha256: str | None = None) -> Path:
    """A local copy of ``wheel`` with its pinned hash (``expected_sha256`` overrides it, for tests): ``wheel_path``,
    the env var, ``<cache>/downloads/``, or a download with ``downloader`` (default: pip)."""
    expected = expected_sha256 or wheel.sha256
    fetch = downloader or (lambda dest: pip_download(dest, package=wheel.package, version=wheel.version))
    explicit = wheel_path or (Path(os.environ[wheel.env_var]) if os.environ.get(wheel.env_var) else None)
    if explicit is not None:
        explicit = explicit.expanduser()
        if not explicit.is_file():
            raise AssetError(f"{wheel.package} wheel {explicit} (from {wheel.env_var} or wheel_path) does not exist")
        digest = sha256_file(explicit)
        if digest != expected:
            raise AssetError(f"{wheel.package} wheel {explicit} has sha256 {digest}, expected {expected}: "
                             f"it is not {wheel.name}, or it is damaged")
        return explicit

    base = Path(cache_dir).expanduser() if cache_dir is not None else unilab_cache.cache_dir()
    ddir = base / "downloads"  # where a downloaded (or user-provided) wheel is kept
    cached = ddir / wheel.name
    if cached.is_file():
        if sha256_file(cached) == expected:
            return cached
        cached.unlink()  # damaged or partial: fetch it again

    ddir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ddir, prefix=".pip-") as tmp:
        if progress:
            print(f"unilab: downloading {wheel.name} ({wheel.size}) with pip ...", file=sys.stderr, flush=True)
        try:
            got = fetch(Path(tmp))
        except WheelDownloadError as exc:
            raise AssetError(
                f"could not download {wheel.holds}: {exc}\n"
                f"unilab needs the file {wheel.name} ({wheel.package} {wheel.version} from PyPI, {wheel.url_hint()},\n"
                f"sha256 {wheel.sha256}). On a machine with network access run\n"
                f"  python -m pip download --no-deps {wheel.package}=={wheel.version}\n"
                f"and either\n"
                f"  - put the file at {cached}\n"
                f"  - or set {wheel.env_var}=/path/to/{wheel.name}\n"
                f"then run `{wheel.fetch}` again. The wheel is only unpacked, never installed.") from exc
        digest = sha256_file(got)
        if digest != expected:
            raise AssetError(f"downloaded {got.name} has sha256 {digest}, expected {expected}; "
                             "the package index served a different file")
        os.replace(got, cached)
    return cached


def build_tree(root: Path, fill: Callable[[Path], dict]) -> None:
    """Build the cache tree ``root`` in a temporary sibling: ``fill(tmp)`` writes the files and returns the manifest
    (written as ``manifest.json``), then the tree replaces a (damaged) one at ``root``; readers never see a half-written
    tree, and a failure leaves nothing behind."""
    tmp = Path(tempfile.mkdtemp(dir=root.parent, prefix=f".{root.name}.tmp-"))
    try:
        (tmp / MANIFEST_NAME).write_text(json.dumps(fill(tmp), indent=1, sort_keys=True))
        trash = root.with_name(f".{root.name}.old-{os.getpid()}") if root.exists() else None
        if trash is not None:
            os.replace(root, trash)
        os.replace(tmp, root)
        if trash is not None:
            shutil.rmtree(trash, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def extract_members(wheel: Path, dest: Path, progress: bool, wanted: Callable[[str], bool] = is_wanted_member,
                    strip: str = WHEEL_DATA_PREFIX, required: Sequence[str] = ROBOT_PREFIXES) -> dict[str, dict]:
    """Extract the ``wanted`` members into ``dest`` (``strip`` removed from their paths; a wheel without a member
    under each prefix of ``required`` is refused); return the manifest table."""
    try:
        zf = zipfile.ZipFile(wheel)
    except (zipfile.BadZipFile, OSError) as exc:
        raise AssetError(f"{wheel} is not a readable wheel (zip): {exc}") from exc
    files: dict[str, dict] = {}
    with zf:
        members = [m for m in zf.infolist() if wanted(m.filename)]
        for prefix in required:
            if not any(m.filename.startswith(prefix) for m in members):
                raise AssetError(f"{wheel} has no {prefix} tree")
        try:
            with tqdm(total=sum(m.file_size for m in members), desc=f"unilab: extract {wheel.name}", unit="B",
                      unit_scale=True, file=sys.stderr, leave=False, disable=not progress) as bar:
                for m in members:
                    rel = m.filename[len(strip):]
                    if ".." in Path(rel).parts or Path(rel).is_absolute():
                        raise AssetError(f"{wheel}: refusing unsafe member path {m.filename!r}")
                    out = dest / rel
                    out.parent.mkdir(parents=True, exist_ok=True)
                    h = hashlib.sha256()
                    with zf.open(m) as src, open(out, "wb") as dst:
                        for chunk in iter(lambda: src.read(_HASH_CHUNK), b""):
                            h.update(chunk)
                            dst.write(chunk)
                            bar.update(len(chunk))
                    files[rel] = {"size": out.stat().st_size, "sha256": h.hexdigest()}
        except zipfile.BadZipFile as exc:
            raise AssetError(f"{wheel} is corrupt: {exc}") from exc
    return files


def _add_unilab_files(dest: Path) -> dict[str, dict]:
    """Write :data:`UNILAB_FILES` into ``dest``; their manifest rows."""
    files: dict[str, dict] = {}
    for rel, name in UNILAB_FILES.items():
        data = (resources.files("unilab.assets") / "models" / name).read_bytes()
        (dest / rel).write_bytes(data)
        files[rel] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return files


@contextlib.contextmanager
def cache_lock(base: Path) -> Iterator[None]:
    """Serialise concurrent fetches into the same cache (advisory, POSIX only)."""
    base.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl  # noqa: PLC0415 - POSIX only
    except ImportError:  # Windows: no advisory locks; the atomic rename still protects readers
        yield
        return
    with open(base / ".holosoma.lock", "w") as fh:  # closing the file releases the lock
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def ensure_assets(cache_dir: str | os.PathLike | None = None, *, force: bool = False, progress: bool = True,
                  wheel_path: str | os.PathLike | None = None, expected_sha256: str = WHEEL_SHA256,
                  downloader: Callable[[Path], Path] = pip_download) -> FetchResult:
    """Return the extracted asset directory, building it if missing or damaged (or ``force``).

    Args:
        cache_dir: cache root; default ``$UNILAB_CACHE`` or ``~/.cache/unilab``.
        progress: print a progress line while downloading/extracting.
        wheel_path: use this local wheel instead of downloading (also ``$UNILAB_HOLOSOMA_WHEEL``; a wheel at
            ``<cache>/downloads/`` is used too).
        expected_sha256: the wheel's hash (overridable for tests with a fake wheel).
        downloader: ``f(dest_dir) -> wheel path``; raises WheelDownloadError on failure.

    Raises AssetError when the wheel cannot be obtained (the message says what to download and where to put it) or
    is not the expected file.
    """
    cdir = Path(cache_dir).expanduser() if cache_dir is not None else None
    root = assets_dir(cdir)
    if not force and not check_cache(root):
        return FetchResult(root=root, rebuilt=False, wheel=None)
    base = root.parent
    with cache_lock(base):
        # another process may have finished the job while this one waited
        if not force and not check_cache(root):
            return FetchResult(root=root, rebuilt=False, wheel=None)
        wheel = acquire_wheel(HOLOSOMA_WHEEL, cdir, downloader, Path(wheel_path) if wheel_path else None, progress,
                              expected_sha256)
        build_tree(root, lambda tmp: {"format": MANIFEST_FORMAT, "source": WHEEL_NAME, "wheel_sha256": expected_sha256,
                                      "files": extract_members(wheel, tmp, progress) | _add_unilab_files(tmp)})
    if progress:
        print(f"unilab: robot assets ready in {root}", file=sys.stderr, flush=True)
    return FetchResult(root=root, rebuilt=True, wheel=wheel)


def wheel_file(cache_dir: str | os.PathLike | None = None, *, progress: bool = False) -> Path:
    """The verified holosoma wheel itself (``$UNILAB_HOLOSOMA_WHEEL``, the cached download, or a fresh one): where
    the recipe tests read holosoma's config values from."""
    cdir = Path(cache_dir).expanduser() if cache_dir is not None else None
    return acquire_wheel(HOLOSOMA_WHEEL, cdir, progress=progress)


def read_wheel_member(member: str, cache_dir: str | os.PathLike | None = None, *, progress: bool = True) -> bytes:
    """A file of the holosoma wheel that the cache does not extract (e.g. ``holosoma/data/robots/g1/g1_29dof.urdf``),
    read from the wheel (downloaded, or found, as for :func:`ensure_assets`); AssetError naming a missing member."""
    cdir = Path(cache_dir).expanduser() if cache_dir is not None else None
    with cache_lock(assets_dir(cdir).parent):
        wheel = wheel_file(cdir, progress=progress)
    try:
        with zipfile.ZipFile(wheel) as zf:
            return zf.read(member)
    except KeyError:
        raise AssetError(f"{wheel} has no {member}") from None


def verify_assets(cache_dir: str | os.PathLike | None = None) -> list[str]:
    """Full check (sizes and sha256 of every file) of an existing cache; [] if intact."""
    return check_cache(assets_dir(cache_dir), full=True)


def scene_xml_path(robot: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """The scene MJCF of built-in robot ``robot`` (a key of :data:`SCENES`), fetching the assets if needed."""
    if robot not in SCENES:
        raise ValueError(f"task.robot.asset: no built-in robot {robot!r} (built-in: {', '.join(SCENES)}); give your "
                         "own MJCF as task.robot.model_xml")
    return ensure_assets(cache_dir).root / SCENES[robot]


def manifest_paths(root: Path, prefix: str, suffixes: Sequence[str] = ()) -> list[Path]:
    """Manifest entries under ``prefix`` (relative to ``root``), optionally filtered by suffix."""
    files = read_manifest(root) or {}
    return sorted(root / rel for rel in files
                  if rel.startswith(prefix) and (not suffixes or rel.endswith(tuple(suffixes))))
