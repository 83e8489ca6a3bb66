"""demo-awareness --protocol paper: DEMO's released instruction, free-form answers judged as
written, unparsed answers counted in the judged means; against a scripted loopback server."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from dialogbench.data.demo.model import AwarenessItem, DemoSet
from dialogbench.data.errors import DataError
from dialogbench.judging.prompts import FRAMINGS
from dialogbench.runner import RoleSpec, run_track
from dialogbench.testing import ChatServer
from dialogbench.tracks.demo.awareness import (
    AWARENESS,
    FREE_FORM_UNREAD,
    AwarenessConfig,
    free_form_answer,
    judged_text,
)

JUDGE_SYSTEMS = {f.system for f in FRAMINGS.values()}
FIXTURES = Path(__file__).resolve().parents[2] / "data" / "demo" / "fixtures"
_CANDIDATE = re.compile(r"<candidate>\n(.*?)\n</candidate>", re.DOTALL)


def released(n: int, instruction: str | None = "default") -> AwarenessItem:
    transcript = f"Ana: can I have the firewood {n}\nBo: only if I get the water"
    text = (
        f"Dialogue history\n{transcript}\nThis is a complete dialogue ... GOAL ... {n}"
        if instruction == "default"
        else instruction
    )
    return AwarenessItem(
        id=f"d{n}:goal",
        task="goal",
        lang="en",
        dialogue_id=f"d{n}",
        transcript=transcript,
        gold={"goal1": "get firewood", "goal2": "get water", "goal_completion": 7},
        instruction=text,
        released_answer=None
        if text is None
        else '{"goal": {"goal1": "get firewood", "goal2": "get water", "goal completion": 7}}',
    )


ANSWERS = {
    # the paper's shape, fenced, with its own key spelling: read for the objective metrics
    1: 'Sure.\n```json\n{"goal": {"goal1": "get firewood", "goal2": "get water", '
    '"goal completion": "7", "reason": "both agree"}}\n```',
    2: "Ana wants firewood and Bo wants water; they mostly get it.",  # no JSON at all
    3: '{"goal": {"goal1": "firewood", "goal2": "water", "goal completion": 3}}',
}


class Scripted:
    """Answers by item number; the judge gives 9/9 to a fenced answer, 2/4 otherwise."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.candidates: list[str] = []

    def __call__(self, body: dict[str, Any]) -> str:
        self.requests.append(body)
        messages = body["messages"]
        if messages[0]["role"] == "system" and messages[0]["content"] in JUDGE_SYSTEMS:
            found = _CANDIDATE.search(messages[1]["content"])
            assert found is not None
            self.candidates.append(found.group(1))
            good = "```json" in found.group(1)
            scores = (9, 9) if good else (2, 4)
            return json.dumps({"reason": "r", "accuracy": scores[0], "hallucination": scores[1]})
        assert [m["role"] for m in messages] == ["user"]  # DEMO's code: no system message
        n = int(messages[0]["content"].rsplit(" ", 1)[1])
        return ANSWERS[n]


def test_paper_protocol_judges_every_answer_as_written(tmp_path: Path) -> None:
    items = [released(1), released(2), released(3)]
    ds = DemoSet(name="demo-release", items=items, sha256="0" * 64, source="hand-made")
    script = Scripted()
    with ChatServer(reply=script) as srv:
        model = RoleSpec("openai-compatible/scripted", srv.base_url)
        config = AwarenessConfig(protocol="paper", n_boot=200, tasks=("goal",))
        result = run_track(AWARENESS, ds, tmp_path / "run", config, {"model": model}).result()
    asked = [r for r in script.requests if r["messages"][0]["role"] == "user"]
    assert len(asked) == 3  # one call each: no correction, whatever came back
    assert all("response_format" not in r for r in asked)  # no schema constraint
    sent = sorted(r["messages"][0]["content"] for r in asked)
    assert sent == sorted(str(i.instruction) for i in items)
    assert sorted(script.candidates) == sorted(ANSWERS.values())  # judged as written

    rows = {
        r["id"]: r
        for r in map(json.loads, (tmp_path / "run" / "items.jsonl").read_text().splitlines())
    }
    assert rows["d1:goal"]["prediction"]["parsed"]["goal_completion"] == 7
    assert rows["d1:goal"]["objective"]["goal_completion"]["abs_error"] == 0.0
    assert rows["d2:goal"]["prediction"]["parsed"] is None
    assert rows["d2:goal"]["prediction"]["error"] == FREE_FORM_UNREAD
    assert rows["d2:goal"]["score"] == 3.0  # judged all the same
    counts = result.counts["en"]["goal"]
    assert counts["prediction_unparsed"] == 1 and counts["unparsed_scored"] == 1
    assert counts["scored"] == 3
    judge = result.summary["judge"]["en"]["goal"]
    assert judge["score"].value == pytest.approx((9 + 3 + 3) / 3)  # unparsed counted
    assert judge["score_parsed_only"].value == pytest.approx((9 + 3) / 2)
    assert judge["score"].n == 3 and judge["score_parsed_only"].n == 2


def test_paper_protocol_needs_the_released_instruction(tmp_path: Path) -> None:
    ds = DemoSet(name="cped-like", items=[released(1, None)], sha256="0" * 64, source="somewhere")
    with ChatServer(reply=Scripted()) as srv:
        model = RoleSpec("openai-compatible/scripted", srv.base_url)
        with pytest.raises(DataError) as caught:
            run_track(AWARENESS, ds, tmp_path, AwarenessConfig(protocol="paper"), {"model": model})
    assert caught.value.field == "instruction" and "--protocol schema" in str(caught.value.fix)


def test_what_the_judge_reads() -> None:
    parsed = {"parsed": {"goal1": "x"}, "raw": "```json\n{...}```"}
    assert judged_text(parsed, "schema") == json.dumps({"goal1": "x"}, indent=2)
    assert judged_text(parsed, "paper") == parsed["raw"]
    assert judged_text({"parsed": None, "raw": "prose"}, "schema") == "prose"
    assert judged_text({"parsed": None, "raw": "", "error": "call failed: x"}, "schema") is None


def test_free_form_answers_read_like_the_release() -> None:
    item = released(1)
    assert free_form_answer(item, ANSWERS[3]) == {
        "goal1": "firewood",
        "goal2": "water",
        "goal_completion": 3,
    }
    assert free_form_answer(item, "no json here") is None
    assert free_form_answer(item, '{"goal": {"goal completion": "eleven"}}') is None
    assert free_form_answer(item, "[1, 2]") is None


def test_paper_protocol_judges_against_demos_released_gold(tmp_path: Path) -> None:
    """Issue 25.2: under --protocol paper the judge reads each item's gold exactly as DEMO's
    file holds it, in its language (a Chinese item's "男", [["开放性", "低"], ...]), with
    DEMO's one English rubric per element, and persona's instruction beside it."""
    from dialogbench.data.demo.registry import load_demo
    from dialogbench.tracks.demo.awareness_prompts import PAPER_RUBRICS, PAPER_TASK_HEAD

    folder = tmp_path / "demo"
    folder.mkdir()
    for lang in ("en", "zh"):
        name = f"element_awareness_{lang}.json"
        (folder / name).write_bytes((FIXTURES / name).read_bytes())
    demo = load_demo(str(folder))
    with ChatServer() as srv:  # logs every request; the judge's replies follow its schema
        model = RoleSpec("openai-compatible/x", srv.base_url)
        run_track(
            AWARENESS, demo, tmp_path / "run", AwarenessConfig(protocol="paper"), {"model": model}
        )
        requests = srv.requests
    judged = [r["messages"][1]["content"] for r in requests if len(r["messages"]) == 2]
    assert len(judged) == len(demo.items)
    raw = {
        f"{i['dataset_id']}:{i['type']}": i["answer"]
        for lang in ("en", "zh")
        for i in json.loads((folder / f"element_awareness_{lang}.json").read_text("utf-8"))
    }
    for item in demo.items:
        answer = raw[f"{item.dialogue_id}:{item.task}"]
        text = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
        (request,) = [t for t in judged if f"<reference>\n{text.strip()}\n</reference>" in t]
        rubric = PAPER_RUBRICS[item.task]
        assert rubric.instructions in request  # one rubric per element, both languages
        assert (PAPER_TASK_HEAD in request) == (item.task == "persona")
        if item.lang == "zh" and item.task == "persona":
            assert '"gender": "男"' in request and '["开放性", "低"]' in request
            assert "male" not in request.split("<reference>")[1].split("</reference>")[0]
    rows = [json.loads(x) for x in (tmp_path / "run" / "items.jsonl").read_text().splitlines()]
    assert all(r["released_answer"] for r in rows)


def test_paper_protocol_needs_the_released_answer(tmp_path: Path) -> None:
    item = released(1).model_copy(update={"released_answer": None})
    ds = DemoSet(name="built-elsewhere", items=[item], sha256="0" * 64, source="somewhere")
    with ChatServer(reply=Scripted()) as srv:
        model = RoleSpec("openai-compatible/scripted", srv.base_url)
        with pytest.raises(DataError) as caught:
            run_track(AWARENESS, ds, tmp_path, AwarenessConfig(protocol="paper"), {"model": model})
    assert caught.value.field == "answer"
