"""Names that become one component of a path: checked where they come from data, encoded
where they are free text (a judge's model spec).

A subject id names the subject's folder in a release (`OUT/<id>/conversation.jsonl`) and in
a run's written outputs, so a loader refuses an id that could not be one folder name on
every common file system: empty, `.` or `..`, holding `/`, `\\`, a drive prefix (`C:`), NUL
or another control character, longer than `MAX_NAME_BYTES` bytes of UTF-8, or equal to
another subject's id once case and Unicode normalisation are ignored (`Anna` and `anna`, or
`é` composed and decomposed, are one folder on macOS and Windows). `check_name` says why a
name is refused, as a `DataError` naming the file, the record and the field;
`check_unique` finds the collisions.

A judge's or a model's name is free text (`openai/gpt-4o`): `encode_name` turns it into a
readable folder name, adding a short digest of the full name when the readable form had to
drop something that could make two names one (an empty or dots-only result, an over-long
name); `encode_names` does the same for a panel, so two names that would share a folder
(`a/b` and `a_b`, `A` and `a`) each get their digest. `inside` checks that a path about to
be written or removed lies inside the folder it belongs to.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path

from pydantic_core import PydanticCustomError

from dialogbench.data.errors import DataError

MAX_NAME_BYTES = 200
"""The longest name (in UTF-8 bytes) used as one path component: file systems allow 255,
and the files made from it add suffixes (`.jsonl.tmp`)."""

FIX = "rename it to a plain name such as 'conv-26' (letters, digits, '-', '_', '.')"
"""What a refused name's error tells the user to do."""

_DRIVE = re.compile(r"^[A-Za-z]:")
_READABLE = re.compile(r"[^A-Za-z0-9._-]+")
_READABLE_MAX = 80
_DIGEST = 8


def name_problem(name: str) -> str | None:
    """Why `name` cannot be one path component, or None when it can."""
    if not name.strip():
        return "is empty or only spaces, which cannot name a folder"
    if name in (".", ".."):
        return f"is '{name}', which names a folder other than its own"
    for char, what in (("/", "'/'"), ("\\", "'\\'")):
        if char in name:
            kind = "an absolute path" if name.startswith(char) else "a path"
            return f"holds {what}, so as a folder name it would be {kind}, not one folder"
    if _DRIVE.match(name):
        return f"starts with a drive ('{name[:2]}'), which makes it a path on Windows"
    for i, char in enumerate(name):
        if unicodedata.category(char) in ("Cc", "Zl", "Zp"):
            what = "NUL" if char == "\0" else f"a control character (U+{ord(char):04X})"
            return f"holds {what} at character {i}, which a folder name cannot hold"
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > MAX_NAME_BYTES:
        return (
            f"is {size} bytes long in UTF-8; a folder name may have at most {MAX_NAME_BYTES} bytes"
        )
    return None


def fold(name: str) -> str:
    """The form two names share when a file system takes them for one: case and Unicode
    normalisation (NFC against NFD) ignored."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", name).casefold())


def check_name(
    name: str,
    *,
    path: str | Path,
    record: str | None,
    field: str | None,
    what: str | None = None,
) -> str:
    """`name`, if it can be one path component; else a `DataError` naming the file, the
    record and the field (`what`, when given, says what the name is)."""
    problem = name_problem(name)
    if problem is not None:
        problem = f"{_quoted(name)} {problem}" + (f" ({what})" if what else "")
        raise DataError(path, problem, record=record, field=field, fix=FIX)
    return name


def safe_name(name: str) -> str:
    """A pydantic validator: `name` if it can be one path component, else an error of
    type `unsafe_name` whose context carries the fix (see `io.parse_record`)."""
    problem = name_problem(name)
    if problem is not None:
        raise PydanticCustomError("unsafe_name", "{problem}", {"problem": problem, "fix": FIX})
    return name


def check_unique(
    named: Iterable[tuple[str, str]], *, path: str | Path, field: str | None, what: str = "folder"
) -> None:
    """Refuse two names (each with its record) that would be one `what` on a file system
    that ignores case or Unicode normalisation, or that are equal."""
    first: dict[str, tuple[str, str]] = {}
    for name, record in named:
        key = fold(name)
        if key in first:
            other, where = first[key]
            raise DataError(
                path,
                f"{collision(name, other)} ({where}): both would be one {what}",
                record=record,
                field=field,
                fix="give every subject its own id, differing in more than case or accents",
            )
        first[key] = (name, record)


def collision(name: str, other: str) -> str:
    """How `name` collides with `other`, shown so that the difference is visible: two
    Unicode forms of one text are written with their code points."""
    if name == other:
        return f"{_quoted(name)} repeats"
    if unicodedata.normalize("NFC", name) == unicodedata.normalize("NFC", other):
        return f"{name!a} differs only by Unicode form (NFC/NFD) from {other!a}"
    return f"{_quoted(name)} differs only by case from {_quoted(other)}"


def encode_name(name: str, fallback: str = "judge") -> str:
    """A readable folder name for the free text `name` (`openai/gpt-4o` ->
    `openai_gpt-4o`): characters outside `A-Za-z0-9._-` become `_`, leading dots and
    underscores go; a name that comes out empty, or longer than 80 characters, is cut
    and gets `-` and the first 8 hex digits of its sha256."""
    readable = _READABLE.sub("_", name).strip("_").lstrip(".")
    if readable and len(readable) <= _READABLE_MAX:
        return readable
    return f"{readable[: _READABLE_MAX - _DIGEST - 1] or fallback}-{digest(name)}"


def encode_names(names: Iterable[str], fallback: str = "judge") -> list[str]:
    """`encode_name` of each of `names`, with its digest added wherever two different names
    would share a folder (`a/b` and `a_b`; `A` and `a`). Equal names stay equal."""
    given = list(names)
    readable = [encode_name(n, fallback) for n in given]
    owners: dict[str, set[str]] = {}
    for name, folder in zip(given, readable, strict=True):
        owners.setdefault(fold(folder), set()).add(name)
    return [
        f"{folder[: _READABLE_MAX - _DIGEST - 1]}-{digest(name)}"
        if len(owners[fold(folder)]) > 1
        else folder
        for name, folder in zip(given, readable, strict=True)
    ]


def digest(name: str) -> str:
    """The first 8 hex digits of the sha256 of `name` (UTF-8)."""
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST]


def inside(
    path: Path, folder: Path, *, record: str | None = None, field: str | None = None
) -> Path:
    """`path`, if it resolves inside `folder` (links followed); else a `DataError`: nothing
    is written or removed outside the folder a command was given."""
    target, root = path.resolve(), folder.resolve()
    if target != root and not target.is_relative_to(root):
        raise DataError(
            path,
            f"lies outside {folder}, the folder being written",
            record=record,
            field=field,
            fix="check the name it was made from; nothing was written there",
        )
    return path


def _quoted(name: str) -> str:
    """`name` as an error quotes it: repr-style, so a control character shows, and cut."""
    shown = ascii(name) if any(unicodedata.category(c) == "Cc" for c in name) else f"'{name}'"
    return shown if len(shown) <= 80 else shown[:77] + "..."
