"""Every public callable of tightdp has a numpydoc docstring: Parameters, Returns and Raises sections.

Public means: the names in ``__all__`` of ``tightdp`` and of every module and subpackage whose dotted path has
no component starting with an underscore (the CLI's modules are described by ``tightdp --help`` and the
generated CLI reference instead), and the public methods and properties those classes define. numpydoc's own
validator (``numpydoc.validate``) reads each docstring, so the sections are parsed the way the API reference
renders them, and a documented parameter that does not exist is caught as well as a missing one.

The rules: a docstring (GL08); every parameter documented and no unknown one (PR01, PR02); a Returns (or Yields)
section for a function or method that returns something (RT01); a Raises section for every callable that takes
arguments, since each validates them. A property needs a summary only.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator
from typing import Any

import pytest

validate_module = pytest.importorskip("numpydoc.validate")

import tightdp

CHECKS = ("GL08", "PR01", "PR02", "RT01")


def public_modules() -> list[str]:
    """Dotted names of the modules whose ``__all__`` is public API."""
    names = ["tightdp"]
    for info in pkgutil.walk_packages(tightdp.__path__, "tightdp."):
        parts = info.name.split(".")[1:]
        if parts[0] == "cli" or any(p.startswith("_") for p in parts):
            continue
        names.append(info.name)
    return sorted(names)


def _takes_arguments(obj: Any) -> bool:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return False
    return any(name not in ("self", "cls") for name in sig.parameters)


def _returns_something(func: Any) -> bool:
    try:
        annotation = inspect.signature(func).return_annotation
    except (TypeError, ValueError):
        return True
    return annotation not in (None, "None", type(None))


def documented_objects(module_name: str) -> Iterator[tuple[str, Any, str]]:
    """(import path, object, kind) of every public callable that ``module_name`` exports and defines."""
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:  # an optional extra (torch, opacus, dask) is not installed
        pytest.skip(f"{module_name}: {exc}")
    for name in getattr(module, "__all__", ()):
        obj = getattr(module, name)
        home = getattr(obj, "__module__", "") or ""
        if not home.startswith("tightdp") or not callable(obj):
            continue
        if inspect.isclass(obj):
            yield f"{module_name}.{name}", obj, "class"
            # the class's own methods and those of the private mixins it is assembled from (a public base
            # class is checked in its own right)
            members: dict[str, Any] = {}
            for klass in reversed(obj.__mro__):
                if klass is obj or (klass.__module__.startswith("tightdp") and klass.__name__.startswith("_")):
                    members.update(vars(klass))
            for attr, member in members.items():
                if attr.startswith("_"):
                    continue
                path = f"{module_name}.{name}.{attr}"
                if isinstance(member, property):
                    yield path, member, "property"
                elif isinstance(member, (staticmethod, classmethod)):
                    yield path, member.__func__, "method"
                elif inspect.isfunction(member):
                    yield path, member, "method"
        else:
            yield f"{module_name}.{name}", obj, "function"


def _owner(module_names: list[str]) -> dict[int, str]:
    """Each public object is checked once, in the module that defines it (or, for an object defined in a
    private module, the deepest public module that exports it)."""
    owner: dict[int, str] = {}
    for module_name in module_names:
        for _path, obj, kind in documented_objects(module_name):
            if kind != "class" and kind != "function":
                continue
            home = obj.__module__
            current = owner.get(id(obj))
            if current is None or module_name == home or (current != home and len(module_name) > len(current)):
                owner[id(obj)] = module_name
    return owner


_OWNER: dict[int, str] = {}


def problems(module_name: str) -> list[str]:
    """Each missing or wrong section of the public callables the module owns, one line each."""
    if not _OWNER:
        _OWNER.update(_owner(public_modules()))
    found: list[str] = []
    owned = True
    for path, obj, kind in documented_objects(module_name):
        if kind in ("class", "function"):
            owned = _OWNER.get(id(obj)) == module_name
        if not owned:
            continue
        if kind == "property":
            if not (obj.__doc__ or "").strip():
                found.append(f"{path}: property without a docstring")
            continue
        if getattr(obj, "__doc__", None) is None or not obj.__doc__.strip():
            found.append(f"{path}: no docstring")
            continue
        report = validate_module.validate(path)
        for code, message in report["errors"]:
            if code not in CHECKS:
                continue
            if code == "RT01" and (kind == "class" or not _returns_something(obj)):
                continue
            found.append(f"{path}: {code} {message}")
        if _takes_arguments(obj) and "Raises\n------" not in inspect.cleandoc(obj.__doc__):
            found.append(f"{path}: no Raises section")
    return found


@pytest.mark.parametrize("module_name", public_modules())
def test_public_callables_have_numpydoc_sections(module_name):
    found = problems(module_name)
    assert not found, f"{len(found)} docstring problems in {module_name}:\n" + "\n".join(found)


def test_every_public_module_declares_all():
    """A public module without ``__all__`` would silently drop out of the check above."""
    missing = [m for m in public_modules() if not hasattr(importlib.import_module(m), "__all__")]
    assert not missing, missing
