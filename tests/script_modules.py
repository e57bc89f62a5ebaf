"""The repository's ``scripts/`` files as modules: they are run as files, not installed with unilab."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_script(relative: str) -> ModuleType:
    """``scripts/<relative>`` imported under its file stem."""
    path = SCRIPTS / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
