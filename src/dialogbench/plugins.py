"""Entry points: what a package installed beside dialogbench adds to it.

    group                   an entry point names                  and gives
    dialogbench.tracks      a `Track` instance (or class)         `dialogbench run NAME`
    dialogbench.memory      a memory system (class or instance)   `--memory NAME`
    dialogbench.rubrics     a rubric file: its path, its JSON     `--rubric NAME`
                            object (a dict) or a `RubricFile`
    dialogbench.retrievers  a retriever (class or instance)       `--retrievers NAME`

A plugin is imported only when its name is used (or `dialogbench run --help` lists it). One
that cannot be imported, or gives the wrong kind of thing, is a `PluginError`: one line naming
the entry point and its package, printed by the CLI as any bad input is (exit 2); nothing
else stops working. A plugin named like a built-in is refused (`refuse`): the built-in is
used, with a warning saying which package asked for the name.
"""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint, entry_points

TRACKS = "dialogbench.tracks"
MEMORY = "dialogbench.memory"
RUBRICS = "dialogbench.rubrics"
RETRIEVERS = "dialogbench.retrievers"


class PluginError(ValueError):
    """A plugin that cannot be used; the message names its entry point and package."""


def package_of(ep: EntryPoint) -> str:
    """The distribution that declares `ep`, with its version ("mypkg 0.1")."""
    dist = ep.dist
    if dist is None:
        return "an unknown package"
    return f"{dist.name} {dist.version}"


def origin(ep: EntryPoint) -> str:
    """How a message names a plugin: its entry point, group and package."""
    return f"entry point '{ep.name} = {ep.value}' in '{ep.group}' (package {package_of(ep)})"


def named(group: str, name: str) -> EntryPoint | None:
    """The entry point `name` of `group`, if a package declares one; two packages declaring
    the same name is a `PluginError`."""
    found = [ep for ep in entry_points(group=group) if ep.name == name]
    if len(found) > 1:
        packages = ", ".join(package_of(ep) for ep in found)
        raise PluginError(
            f"{len(found)} packages declare '{name}' in '{group}' ({packages}); uninstall all "
            "but one"
        )
    return found[0] if found else None


def names(group: str) -> list[str]:
    """The names declared in `group`, in the order found, each once (nothing is imported)."""
    return list(dict.fromkeys(ep.name for ep in entry_points(group=group)))


def load(ep: EntryPoint) -> object:
    """Import what `ep` names; any failure is one `PluginError` line, never a traceback."""
    try:
        return ep.load()
    except (Exception, SystemExit) as e:
        raise PluginError(f"cannot load {origin(ep)}: {why(e)}") from None


def build(obj: object, ep: EntryPoint) -> object:
    """`obj` as an instance: a class is built with no arguments."""
    if not isinstance(obj, type):
        return obj
    try:
        return obj()
    except (Exception, SystemExit) as e:
        raise PluginError(f"cannot build {obj.__name__} of {origin(ep)}: {why(e)}") from None


_REFUSED: set[tuple[str, str]] = set()


def refuse(group: str, name: str, what: str) -> None:
    """Warn (once a process, on stderr) when a package declares `name` in `group` though it
    is a built-in `what`: the built-in is what runs."""
    if (group, name) in _REFUSED:
        return
    clashing = [ep for ep in entry_points(group=group) if ep.name == name]
    if not clashing:
        return
    _REFUSED.add((group, name))
    for ep in clashing:
        print(
            f"warning: {origin(ep)} is refused: '{name}' is a built-in {what}; "
            "rename the entry point to use the plugin",
            file=sys.stderr,
        )


def why(e: BaseException) -> str:
    """An error in one line: its type and the first line of its message."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__
