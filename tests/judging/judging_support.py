"""Judges backed by real loopback chat servers (no mocks), and the rubric the tests score with."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from dialogbench.judging import Dimension, Flag, Judge, Rubric
from dialogbench.models import Model
from dialogbench.models.openai_compat import OpenAICompatible
from dialogbench.testing import ChatServer, Fault

Body = dict[str, Any]
T = TypeVar("T")

QA = Rubric(
    name="qa",
    instructions="Decide how well the candidate answers the question.",
    dimensions=(
        Dimension("accuracy", 0, 10, "Does the answer agree with the reference?"),
        Dimension("clarity", 1, 5, "Is the answer easy to follow?"),
    ),
    flags=(Flag("uses_context", "Does the answer draw on the conversation?"),),
)

_CANDIDATE = re.compile(r'<candidate(?: label="([A-Z]+)")?>\n(.*?)\n</candidate>', re.DOTALL)


def first_prompt(body: Body) -> str:
    """The first user message of a request (the task, before any correction)."""
    return str(next(m["content"] for m in body["messages"] if m["role"] == "user"))


def shown_candidates(body: Body) -> list[tuple[str, str]]:
    """(label, text) of each candidate, in the order the prompt shows them."""
    return [(label, text) for label, text in _CANDIDATE.findall(first_prompt(body))]


class Harness:
    """Starts servers and judges; `run` awaits a coroutine, then closes every judge's model."""

    def __init__(self) -> None:
        self.servers: list[ChatServer] = []
        self.models: list[Model] = []

    def server(
        self, reply: Callable[[Body], str] | None = None, script: tuple[Fault, ...] = ()
    ) -> ChatServer:
        srv = ChatServer(reply=reply, script=script).start()
        self.servers.append(srv)
        return srv

    def judge(self, srv: ChatServer, rubric: Rubric = QA, name: str = "judge") -> Judge:
        provider = OpenAICompatible(f"openai-compatible/{name}", "judge", srv.base_url, None)
        model = Model(provider, cache=None)
        self.models.append(model)
        return Judge(model, rubric)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        async def main() -> T:
            try:
                return await coro
            finally:
                for model in self.models:
                    await model.aclose()
                self.models.clear()

        return asyncio.run(main())

    def stop(self) -> None:
        for srv in self.servers:
            srv.stop()
