"""The judge's prompt wording (our own), in English and Chinese, and the messages built from a
rubric and an item.

Everything a judge is told besides the rubric itself (system text, headings, output
instructions, the reply schema's field descriptions, the correction after an unusable
reply) is one `Framing` (in `dialogbench.lang`, with the languages themselves);
`FRAMINGS[rubric.lang]` picks the one a rubric is framed in.

Texts under judgement are wrapped in tags (<context>, <reference>, <candidate label="A">) so
they are easy to tell apart from the instructions. Blinded candidates carry only their labels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dialogbench.lang import EN, FRAMINGS, JUDGE_SYSTEM, ZH, Framing
from dialogbench.models.types import ChatMessage

if TYPE_CHECKING:
    from dialogbench.judging.rubric import Rubric

__all__ = [
    "EN",
    "FRAMINGS",
    "JUDGE_SYSTEM",
    "ZH",
    "Framing",
    "blind_messages",
    "single_messages",
]


def _rubric_block(rubric: Rubric, f: Framing) -> str:
    lines = [rubric.instructions.strip(), "", f.dimensions_head]
    lines += [
        f.dimension_line.format(name=d.name, low=d.low, high=d.high, criteria=d.criteria)
        for d in rubric.dimensions
    ]
    if rubric.flags:
        lines += ["", f.flags_head]
        lines += [f.flag_line.format(name=g.name, question=g.question) for g in rubric.flags]
    return "\n".join(lines)


def _fields(rubric: Rubric, f: Framing) -> str:
    dims = ", ".join(f'"{d.name}" ({d.low}-{d.high})' for d in rubric.dimensions)
    text = f.score_fields.format(dims=dims)
    if rubric.flags:
        text += f.flag_fields.format(flags=", ".join(f'"{g.name}"' for g in rubric.flags))
    return text


def _tagged(tag: str, text: str, label: str | None = None) -> str:
    attr = f' label="{label}"' if label is not None else ""
    return f"<{tag}{attr}>\n{text.strip()}\n</{tag}>"


def _shared(rubric: Rubric, reference: str | None, context: str | None) -> list[str]:
    f = FRAMINGS[rubric.lang]
    parts = [_rubric_block(rubric, f)]
    if context is not None:
        parts.append(f"{f.context_intro}\n{_tagged('context', context)}")
    if reference is not None:
        parts.append(f"{f.reference_intro}\n{_tagged('reference', reference)}")
    return parts


def _messages(rubric: Rubric, parts: list[str]) -> list[ChatMessage]:
    return [
        {"role": "system", "content": FRAMINGS[rubric.lang].system},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def single_messages(
    rubric: Rubric, candidate: str, reference: str | None, context: str | None
) -> list[ChatMessage]:
    """The messages asking for a verdict on one candidate."""
    f = FRAMINGS[rubric.lang]
    parts = _shared(rubric, reference, context)
    parts.append(f"{f.candidate_intro}\n{_tagged('candidate', candidate)}")
    parts.append(f.single_output.format(fields=_fields(rubric, f)))
    return _messages(rubric, parts)


def blind_messages(
    rubric: Rubric,
    labelled: list[tuple[str, str]],
    reference: str | None,
    context: str | None,
) -> list[ChatMessage]:
    """The messages asking for verdicts on `(label, text)` candidates, in the order given."""
    f = FRAMINGS[rubric.lang]
    parts = _shared(rubric, reference, context)
    shown = "\n\n".join(_tagged("candidate", text, label) for label, text in labelled)
    parts.append(f"{f.candidates_intro}\n{shown}")
    labels = ", ".join(label for label, _ in labelled)
    parts.append(f.blind_output.format(labels=labels, fields=_fields(rubric, f)))
    return _messages(rubric, parts)
