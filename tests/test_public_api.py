"""Every package's `__all__` names only what it really exports, so `import *` works."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import dialogbench


def packages() -> list[str]:
    found = [dialogbench.__name__]
    for info in pkgutil.walk_packages(dialogbench.__path__, prefix="dialogbench."):
        if info.ispkg:
            found.append(info.name)
    return sorted(found)


def test_every_package_is_found() -> None:
    assert {"dialogbench.stats", "dialogbench.data", "dialogbench.data.demo"} <= set(packages())


@pytest.mark.parametrize("name", packages())
def test_star_import_works(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", [])
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names {missing}, which it does not define"
    namespace: dict[str, object] = {}
    exec(f"from {name} import *", namespace)
    assert set(exported) <= set(namespace)


@pytest.mark.parametrize("name", packages())
def test_no_export_hides_a_submodule(name: str) -> None:
    """`from pkg import x` must not give a function where `pkg/x.py` is meant."""
    module = importlib.import_module(name)
    for info in pkgutil.iter_modules(module.__path__):
        importlib.import_module(f"{name}.{info.name}")
        assert inspect.ismodule(getattr(module, info.name)), f"{name}.{info.name} is shadowed"
