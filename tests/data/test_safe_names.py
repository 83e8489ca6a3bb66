"""The rules for names that become one path component (`data.safe_names`)."""

from __future__ import annotations

import hashlib
import os
import unicodedata
from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from dialogbench.data.errors import DataError
from dialogbench.data.io import parse_record
from dialogbench.data.model import FolderId, Subject
from dialogbench.data.safe_names import (
    MAX_NAME_BYTES,
    check_name,
    check_unique,
    digest,
    encode_name,
    encode_names,
    fold,
    inside,
    name_problem,
)

NFC = unicodedata.normalize("NFC", "José")
NFD = unicodedata.normalize("NFD", "José")

REFUSED = {
    "": "empty",
    "   ": "empty",
    ".": "'.'",
    "..": "'..'",
    "/some/dir/PWNED": "an absolute path",
    "a/b": "'/'",
    "../up": "'/'",
    "a\\b": "'\\'",
    "\\\\server\\share": "an absolute path",
    "C:evil": "drive",
    "nul\0byte": "NUL",
    "tab\there": "U+0009",
    "bell\x07": "U+0007",
    "del\x7f": "U+007F",
    "line\u2028sep": "U+2028",
    "x" * (MAX_NAME_BYTES + 1): f"at most {MAX_NAME_BYTES} bytes",
    "é" * (MAX_NAME_BYTES // 2 + 1): "bytes long in UTF-8",  # 2 bytes each
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_unsafe_names_are_refused_saying_why(name: str) -> None:
    problem = name_problem(name)
    assert problem is not None and REFUSED[name] in problem


@pytest.mark.parametrize(
    "name",
    ["conv-26", "S1", "ana-ben", "gpt4_2655b836", "Anna Müller", "用户一", "a.b", "...x", NFD,
     "x" * MAX_NAME_BYTES, "conv:1"],
)  # fmt: skip
def test_plain_names_pass(name: str) -> None:
    assert name_problem(name) is None
    assert check_name(name, path="f.json", record="r", field="id") == name


def test_the_rules_against_the_file_system(tmp_path: Path) -> None:
    """Against the file system: a name the rules pass is one folder made inside the parent;
    a refused path-like one, joined as it is, would not be."""
    for name in ("conv-26", "a.b", "...x", "Anna Müller", "x" * MAX_NAME_BYTES):
        made = tmp_path / name
        made.mkdir()
        assert made.resolve().parent == tmp_path.resolve()
    for name in ("..", ".", "/some/dir/PWNED", "a/b", "../up"):
        assert name_problem(name) is not None
        assert (tmp_path / name).resolve().parent != tmp_path.resolve()


def test_check_name_error_names_file_record_field_and_fix() -> None:
    with pytest.raises(DataError) as got:
        check_name("/etc/x", path="locomo.json", record="sample 3", field="sample_id")
    e = got.value
    assert (e.path, e.record, e.field) == ("locomo.json", "sample 3", "sample_id")
    text = str(e)
    assert text.startswith("locomo.json, sample 3, field 'sample_id': '/etc/x' holds '/'")
    assert "fix: rename it" in text


def test_a_control_character_shows_escaped_and_a_long_name_is_cut() -> None:
    with pytest.raises(DataError) as got:
        check_name("a\0b", path="f", record=None, field="id")
    assert "'a\\x00b'" in str(got.value) and "\0" not in str(got.value)
    with pytest.raises(DataError) as got:
        check_name("q" * 5_000_000, path="f", record=None, field="id")
    assert len(str(got.value)) < 500


def test_fold_ignores_case_and_normal_form() -> None:
    assert NFC != NFD and fold(NFC) == fold(NFD)
    assert fold("Anna") == fold("anna") == fold("ANNA")
    assert fold("Straße") == fold("STRASSE")
    assert fold("anna") != fold("anne")


@pytest.mark.parametrize(
    ("a", "b", "says"),
    [("S1", "S1", "repeats"), ("Anna", "anna", "differs only by case"), (NFC, NFD, "Unicode")],
)
def test_collisions_are_refused_naming_both_records(a: str, b: str, says: str) -> None:
    with pytest.raises(DataError) as got:
        check_unique(
            [(a, "sample 0"), ("other", "sample 1"), (b, "sample 2")], path="f", field="id"
        )
    e = got.value
    assert e.record == "sample 2" and e.field == "id" and says in str(e) and "sample 0" in str(e)
    check_unique([("a", "r0"), ("b", "r1")], path="f", field="id")  # distinct: fine


def test_subject_id_is_checked_by_the_model_with_the_fix() -> None:
    with pytest.raises(ValidationError):
        TypeAdapter(FolderId).validate_python("..")
    fields = {"id": "../x", "messages": []}
    with pytest.raises(DataError) as got:
        parse_record(Subject, fields, "data.json", "conversation 0", {"id": "conv_id"})
    e = got.value
    assert e.field == "conv_id" and "'/'" in str(e) and "fix: rename it" in str(e)


def test_encode_name_keeps_plain_names_readable() -> None:
    assert encode_name("openai-compatible/a") == "openai-compatible_a"
    assert encode_name("openai/gpt-4o") == "openai_gpt-4o"
    assert encode_name("a" * 80) == "a" * 80


@pytest.mark.parametrize(
    "name", ["..", ".", "", "/", "\0", "../../x", ".hidden", "x" * 300, "a/" * 200, "用户"]
)
def test_encode_name_is_always_one_safe_folder(name: str, tmp_path: Path) -> None:
    folder = encode_name(name)
    assert name_problem(folder) is None and not folder.startswith(".")
    assert len(folder) <= 80
    (tmp_path / folder).mkdir()
    assert (tmp_path / folder).resolve().parent == tmp_path.resolve()


def test_encode_name_adds_the_digest_where_it_drops_the_name() -> None:
    assert encode_name("..") == f"judge-{digest('..')}" != encode_name(".")
    assert digest("..") == hashlib.sha256(b"..").hexdigest()[:8]
    long = encode_name("x" * 300)
    assert long.endswith(digest("x" * 300)) and long != encode_name("x" * 301)


def test_encode_names_separates_names_that_would_share_a_folder() -> None:
    got = encode_names(["a/b", "a_b", "c"])
    assert got == [f"a_b-{digest('a/b')}", f"a_b-{digest('a_b')}", "c"]
    upper, lower = encode_names(["p/Model", "p/model"])
    assert fold(upper) != fold(lower)
    assert encode_names(["x", "x"]) == ["x", "x"]  # equal names stay equal (refused by callers)
    assert encode_names(["openai-compatible/a", "openai-compatible/b"]) == [
        "openai-compatible_a",
        "openai-compatible_b",
    ]


def test_inside_refuses_a_path_that_leaves_the_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    assert inside(out / "S1", out) == out / "S1"
    for bad in (out / ".." / "x", Path("/tmp/elsewhere")):
        with pytest.raises(DataError, match="lies outside"):
            inside(bad, out, record="subject 'x'", field="id")
    (tmp_path / "victim").mkdir()
    os.symlink(tmp_path / "victim", out / "link")
    with pytest.raises(DataError, match="lies outside"):
        inside(out / "link" / "f", out)
