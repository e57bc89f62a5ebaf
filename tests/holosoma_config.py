"""holosoma 0.0.3's config values, read from its wheel (the file the assets come from) without importing holosoma,
whose config modules need pydantic and more: a preset is the constructor call assigned to its name, evaluated with
literals as values, nested calls as dicts of their keywords, names as their source text."""

from __future__ import annotations

import ast
import functools
import zipfile
from typing import Any

from unilab.assets import holosoma


@functools.cache
def _module(path: str) -> ast.Module:
    with zipfile.ZipFile(holosoma.wheel_file()) as zf:
        return ast.parse(zf.read(f"holosoma/{path}").decode())


def _value(node: ast.AST) -> Any:
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute) and node.func.attr == "add":  # REGISTRY.add(name, config)
            return _value(node.args[-1])
        out = {k.arg: _value(k.value) for k in node.keywords}
        if node.args:  # dataclasses.replace(base, ...): the base by name
            out["__base__"] = ast.unparse(node.args[0])
        return out
    if isinstance(node, ast.Dict):
        return {_value(k): _value(v) for k, v in zip(node.keys, node.values, strict=True)}
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(e) for e in node.elts]
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)


def preset(path: str, name: str) -> Any:
    """The value assigned to ``name`` in ``holosoma/<path>`` (e.g. ``config_values/robot.py``,
    ``t1_29dof_waist_wrist``)."""
    for node in _module(path).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return _value(node.value)
    raise KeyError(f"holosoma/{path} assigns no {name!r}")


def class_default(path: str, cls: str, name: str) -> Any:
    """The default of field ``name`` of the dataclass ``cls`` in ``holosoma/<path>`` (a config type)."""
    for node in _module(path).body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.target.id == name:
                    return _value(item.value)
    raise KeyError(f"holosoma/{path}: no field {cls}.{name}")


def param_default(path: str, key: str) -> Any:
    """The default a term in ``holosoma/<path>`` takes for a parameter its config does not give:
    ``params.get("<key>", default)``."""
    for node in ast.walk(_module(path)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and len(node.args) == 2 and isinstance(node.args[0], ast.Constant) and node.args[0].value == key):
            return _value(node.args[1])
    raise KeyError(f"holosoma/{path}: no params.get({key!r}, ...)")
