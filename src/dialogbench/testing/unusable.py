"""A backend whose first answer to each request cannot be used: for testing that an unusable
reply is a failed call, counted by kind, never cached, and asked again by a rerun.

    flaky = UnusableFirst(good)                 # good: body -> a usable reply
    with ChatServer(reply=flaky) as srv:
        ...                                     # first run: every first answer is `bad`
        flaky.spoiled                           # the requests answered badly, in order
        ...                                     # rerun: the same requests now get `good`

A *request* here is its conversation (the messages, as sent), so an asking that differs only
in its seed (the next retry of a call, `Model.generate_parsed`) counts as the same request
asked again. `applies` picks the requests that get the treatment (e.g. only the judge's, by
their model name or system prompt); the others are always answered by `good`.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from dialogbench.testing.chatserver import default_reply

__all__ = ["NOT_JSON", "UnusableFirst", "conversation"]

Body = dict[str, Any]

NOT_JSON = "Sorry, I would rather say it in my own words."
"""The default bad answer: no JSON in it (an `unparseable` reply)."""


def conversation(body: Body) -> str:
    """A request's conversation as canonical text: what makes two requests the same one."""
    return json.dumps(body.get("messages"), sort_keys=True, ensure_ascii=False)


class UnusableFirst:
    """A `ChatServer` reply: the first answer to each distinct conversation `applies` picks
    is `bad` (a text, or body -> text); every later answer, and every answer to the others,
    is `good` (default: the server's own reply, `chatserver.default_reply`)."""

    def __init__(
        self,
        good: Callable[[Body], str] | None = None,
        *,
        bad: str | Callable[[Body], str] = NOT_JSON,
        applies: Callable[[Body], bool] | None = None,
    ) -> None:
        self.good = good or default_reply
        self.bad = bad
        self.applies = applies
        self.answered: Counter[str] = Counter()
        """Conversation -> how often it was answered (picked requests only)."""
        self._spoiled: list[Body] = []
        self._lock = threading.Lock()

    @property
    def spoiled(self) -> list[Body]:
        """The requests answered badly, in order of arrival."""
        with self._lock:
            return list(self._spoiled)

    def picks(self, body: Body) -> bool:
        """Whether `body` is one of the requests this backend spoils the first time."""
        return self.applies is None or self.applies(body)

    def failed_askings(self) -> list[Body]:
        """The spoiled requests that began an asking of a call, leaving out the corrections
        sent after them (a spoiled conversation that extends an earlier spoiled one): what a
        rerun should send again, once each."""
        spoiled = self.spoiled
        seen = {conversation(b) for b in spoiled}

        def correction(b: Body) -> bool:
            messages = b.get("messages") or []
            return len(messages) > 2 and conversation({"messages": messages[:-2]}) in seen

        return [b for b in spoiled if not correction(b)]

    def __call__(self, body: Body) -> str:
        if not self.picks(body):
            return self.good(body)
        key = conversation(body)
        with self._lock:
            self.answered[key] += 1
            first = self.answered[key] == 1
            if first:
                self._spoiled.append(body)
        if not first:
            return self.good(body)
        return self.bad if isinstance(self.bad, str) else self.bad(body)
