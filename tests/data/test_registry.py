"""The registry: layouts recognised from structure, names, empty registered datasets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dialogbench.data.errors import DataError
from dialogbench.data.registry import load_dataset

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _locomo_sample(turns: int) -> dict[str, object]:
    session = [
        {"speaker": "AB"[t % 2], "dia_id": f"D1:{t + 1}", "text": f"message {t} " + "x" * 200}
        for t in range(turns)
    ]
    return {
        "sample_id": "c1",
        "conversation": {"speaker_a": "A", "speaker_b": "B", "session_1": session},
        "qa": [{"question": "?", "answer": "x", "evidence": ["D1:1"], "category": 4}],
    }


def test_pretty_printed_locomo_with_qa_after_64_kib(tmp_path: Path) -> None:
    path = tmp_path / "my_chats.json"
    path.write_text(json.dumps([_locomo_sample(600)], indent=4))
    text = path.read_text()
    assert text.index('"qa"') > 1 << 16 and '"conversation": {' in text[:200]
    ds = load_dataset(str(path))
    assert ds.name == "my_chats" and len(ds.subjects[0].messages) == 600


def test_paths_are_named_after_their_file_or_folder(tmp_path: Path) -> None:
    lme = tmp_path / "haystack.json"
    lme.write_bytes((FIXTURES / "longmemeval_mini.json").read_bytes())
    assert load_dataset(str(lme)).name == "haystack"
    folder = tmp_path / "conv_folder"
    folder.mkdir()
    (folder / "locomo10.json").write_text(json.dumps([_locomo_sample(2)]))
    assert load_dataset(str(folder)).name == "conv_folder"
    assert load_dataset("sample").name == "sample"


def test_registered_names_keep_their_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "locomo").mkdir()
    (tmp_path / "locomo" / "locomo10.json").write_text(json.dumps([_locomo_sample(2)]))
    (tmp_path / "longmemeval").mkdir()
    (tmp_path / "longmemeval" / "longmemeval_s.json").write_bytes(
        (FIXTURES / "longmemeval_mini.json").read_bytes()
    )
    monkeypatch.setenv("DIALOGBENCH_DATA", str(tmp_path))
    assert load_dataset("locomo").name == "locomo"
    assert load_dataset("longmemeval").name == "longmemeval"


@pytest.mark.parametrize(
    ("folder", "filename", "content"),
    [
        ("locomo", "locomo10.json", "[]"),
        ("memorybank", "memory_bank_en.json", "{}"),
        ("longmemeval", "longmemeval_s.json", "[]"),
    ],
)
def test_registered_dataset_that_is_empty(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, folder: str, filename: str, content: str
) -> None:
    (tmp_path / folder).mkdir()
    (tmp_path / folder / filename).write_text(content)
    monkeypatch.setenv("DIALOGBENCH_DATA", str(tmp_path))
    with pytest.raises(DataError, match="the dataset holds no subjects") as info:
        load_dataset(folder)
    assert info.value.path.endswith(filename)


@pytest.mark.parametrize(
    ("content", "found"),
    [
        ("[]", "a list with nothing in it"),
        ('{"a": 1}', "an object whose first record is a number"),
        ('[{"turns": []}]', "a list whose first record has the keys turns"),
        ('"text"', "a string"),
    ],
)
def test_unrecognised_layout_says_what_it_found(tmp_path: Path, content: str, found: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(content)
    with pytest.raises(DataError, match="unrecognised layout") as info:
        load_dataset(str(path))
    assert found in str(info.value)


def test_invalid_utf8_while_sniffing(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(b'[{"conversation": "\xff"}]')
    with pytest.raises(DataError, match="not UTF-8"):
        load_dataset(str(path))


def test_demo_name_says_where_it_belongs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError, match="cped is a DEMO corpus"):
        load_dataset("cped")
