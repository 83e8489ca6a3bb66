"""Who each speaker is across subjects (`run privacy --speaker-id FILE`).

A speaker is named within its subject (`SUBJECT/SPEAKER`), so the same person in two
conversations is two speakers unless a file says otherwise. The file maps speakers to
person ids, in either form:

    JSON  {"conv-1/John": "john-a", "conv-7/John": "john-a", "conv-9/John": "john-b"}
    CSV   a header `subject,speaker,person`, then one row per speaker (a name `.csv`)

Speakers given one person id are one person; a speaker the file does not name is the person
its messages say (`Message.person`, where the data gives one), else its own person,
`SUBJECT/SPEAKER` (so mapping a speaker onto another's `SUBJECT/SPEAKER` joins the two).
Every speaker the file names must be in the dataset.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from dialogbench.data.errors import DataError
from dialogbench.data.model import Dataset

Speaker = tuple[str, str]
"""(subject id, speaker name)."""
FORMS = (
    'JSON {"SUBJECT/SPEAKER": "PERSON", ...}, or a .csv file with the header subject,speaker,person'
)
CSV_COLUMNS = ("subject", "speaker", "person")


def person_of(
    people: Mapping[Speaker, str], subject: str, speaker: str, given: str | None = None
) -> str:
    """The person id of a speaker's message: the file's, else the one the data `given`
    with the message, else `SUBJECT/SPEAKER`."""
    return people.get((subject, speaker)) or given or f"{subject}/{speaker}"


def must_exist(path: Path) -> None:
    """A `DataError` when there is no file at `path`."""
    if not path.is_file():
        raise DataError(
            path, "no such speaker-id file", field="speaker_id", fix=f"give a file: {FORMS}"
        )


def read_speaker_ids(path: Path, dataset: Dataset) -> dict[Speaker, str]:
    """(subject, speaker) -> person id, from a JSON or CSV file (module docstring); a
    `DataError` naming the file, the entry, the field and the fix."""
    must_exist(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a spreadsheet's byte-order mark too
    except UnicodeDecodeError as e:
        raise DataError(path, f"not UTF-8 text ({e.reason})", fix="save it as UTF-8") from None
    rows = _csv_rows(path, text) if path.suffix.lower() == ".csv" else _json_rows(path, text)
    speakers: dict[str, set[str]] = {}
    for s in dataset.subjects:
        speakers[s.id] = {m.speaker for m in s.messages}
    people: dict[Speaker, str] = {}
    where_of: dict[Speaker, str] = {}
    for where, subject, speaker, person in rows:
        if subject not in speakers:
            known = ", ".join(list(speakers)[:5])
            raise DataError(
                path,
                f"no subject {subject!r} in dataset {dataset.name!r}",
                record=where,
                field="subject",
                fix=f"check the subject id (its subjects: {known}, ...)",
            )
        if speaker not in speakers[subject]:
            known = ", ".join(sorted(speakers[subject])[:10])
            raise DataError(
                path,
                f"subject {subject!r} has no speaker {speaker!r}",
                record=where,
                field="speaker",
                fix=f"check the spelling (its speakers: {known})",
            )
        key = (subject, speaker)
        if key in people and people[key] != person:
            raise DataError(
                path,
                f"{subject}/{speaker} is given twice, as {people[key]!r} ({where_of[key]}) "
                f"and {person!r}",
                record=where,
                field="person",
                fix="give each speaker one person id",
            )
        people[key], where_of[key] = person, where
    return people


def _json_rows(path: Path, text: str) -> list[tuple[str, str, str, str]]:
    """(where, subject, speaker, person) of each entry of a JSON object."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(path, f"not JSON ({e.msg} at line {e.lineno})", fix=FORMS) from None
    if not isinstance(data, dict):
        raise DataError(path, f"expected a JSON object, found a {type(data).__name__}", fix=FORMS)
    rows = []
    for key, person in data.items():
        where = f"entry {key!r}"
        subject, slash, speaker = key.partition("/")
        if not slash or not subject or not speaker:
            raise DataError(
                path,
                "a key must be SUBJECT/SPEAKER",
                record=where,
                fix='write the subject id, a slash and the speaker, e.g. "conv-26/Caroline"',
            )
        rows.append((where, subject, speaker, _person(path, where, person)))
    return rows


def _csv_rows(path: Path, text: str) -> list[tuple[str, str, str, str]]:
    """(where, subject, speaker, person) of each row of a CSV file with its header."""
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in CSV_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise DataError(
            path,
            f"the header lacks {', '.join(missing)}",
            record="line 1",
            fix="start the file with the header subject,speaker,person",
        )
    rows = []
    for row in reader:
        where = f"line {reader.line_num}"
        cells = {}
        for column in CSV_COLUMNS[:2]:
            value = row.get(column)
            if not value:
                raise DataError(path, "empty", record=where, field=column, fix=f"give the {column}")
            cells[column] = value
        person = _person(path, where, row.get("person"))
        rows.append((where, cells["subject"], cells["speaker"], person))
    return rows


def _person(path: Path, where: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise DataError(
            path,
            f"the person id is {value!r}",
            record=where,
            field="person",
            fix="give the person id as a non-empty string",
        )
    return value


def repeated_names(
    keys: Iterable[str], members: Iterable[tuple[Speaker, ...]], people: Mapping[Speaker, str]
) -> dict[str, list[str]]:
    """Speaker names said in two or more subjects by speakers nobody identified (their
    person id is their own `SUBJECT/SPEAKER`: neither the file nor the data gives one) and
    whose name the file gives for no one: name -> the subjects (each such speaker is taken
    as its own person, which is wrong if they are one)."""
    named = {speaker for _, speaker in people}
    found: dict[str, list[str]] = {}
    for key, group in zip(keys, members, strict=True):
        subject, speaker = group[0]
        alone = len(group) == 1 and key == f"{subject}/{speaker}" and group[0] not in people
        if alone and speaker not in named:
            found.setdefault(speaker, []).append(subject)
    return {name: subjects for name, subjects in found.items() if len(subjects) > 1}
