"""The judge's prompt wording (our own), and the messages built from a rubric and an item.

Texts under judgement are wrapped in tags (<context>, <reference>, <candidate label="A">) so
they are easy to tell apart from the instructions. Blinded candidates carry only their labels.
"""

from __future__ import annotations

from dialogbench.judging.rubric import Rubric
from dialogbench.models.types import ChatMessage

JUDGE_SYSTEM = (
    "You evaluate replies written by conversational AI systems, impartially and strictly. "
    "Judge only what is on the page, against the criteria you are given. Give the top of a "
    "scale only when a criterion is met in full, and never reward length, confidence or "
    "polish for their own sake. Score every dimension on its own: one score must not pull "
    "another up or down."
)

DIMENSIONS_HEAD = "Score these dimensions, each with an integer in the range shown:"
FLAGS_HEAD = "Also answer each of these with true or false:"

CONTEXT_INTRO = "The conversation or question the candidate responds to:"
REFERENCE_INTRO = (
    "A reference answer, to be taken as correct. Different wording is fine; what matters is "
    "whether the candidate agrees with it:"
)
CANDIDATE_INTRO = "The candidate to evaluate:"
CANDIDATES_INTRO = (
    "The candidates to evaluate. Their labels and their order are arbitrary and say nothing "
    "about their quality; evaluate each one on its own merits, not by comparison with its "
    "neighbours:"
)

SINGLE_OUTPUT = (
    "Reply with one JSON object and nothing else. Write your reasoning first, in a few "
    'sentences, under "reason"; then give {fields}.'
)
BLIND_OUTPUT = (
    'Reply with one JSON object and nothing else, of the form {{"candidates": [...]}}, holding '
    "exactly one entry for each label ({labels}). In each entry put the label under "
    '"label", your reasoning for that candidate under "reason" (written first, in a few '
    "sentences), then {fields}."
)


def _rubric_block(rubric: Rubric) -> str:
    lines = [rubric.instructions.strip(), "", DIMENSIONS_HEAD]
    lines += [f"- {d.name} ({d.low} to {d.high}): {d.criteria}" for d in rubric.dimensions]
    if rubric.flags:
        lines += ["", FLAGS_HEAD]
        lines += [f"- {f.name}: {f.question}" for f in rubric.flags]
    return "\n".join(lines)


def _fields(rubric: Rubric) -> str:
    dims = ", ".join(f'"{d.name}" ({d.low}-{d.high})' for d in rubric.dimensions)
    text = f"one integer per dimension under its name: {dims}"
    if rubric.flags:
        flags = ", ".join(f'"{f.name}"' for f in rubric.flags)
        text += f"; and true or false for {flags}"
    return text


def _tagged(tag: str, text: str, label: str | None = None) -> str:
    attr = f' label="{label}"' if label is not None else ""
    return f"<{tag}{attr}>\n{text.strip()}\n</{tag}>"


def _shared(rubric: Rubric, reference: str | None, context: str | None) -> list[str]:
    parts = [_rubric_block(rubric)]
    if context is not None:
        parts.append(f"{CONTEXT_INTRO}\n{_tagged('context', context)}")
    if reference is not None:
        parts.append(f"{REFERENCE_INTRO}\n{_tagged('reference', reference)}")
    return parts


def single_messages(
    rubric: Rubric, candidate: str, reference: str | None, context: str | None
) -> list[ChatMessage]:
    """The messages asking for a verdict on one candidate."""
    parts = _shared(rubric, reference, context)
    parts.append(f"{CANDIDATE_INTRO}\n{_tagged('candidate', candidate)}")
    parts.append(SINGLE_OUTPUT.format(fields=_fields(rubric)))
    return [
        {"role": "system", "content": JUDGE_SYSTEM},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def blind_messages(
    rubric: Rubric,
    labelled: list[tuple[str, str]],
    reference: str | None,
    context: str | None,
) -> list[ChatMessage]:
    """The messages asking for verdicts on `(label, text)` candidates, in the order given."""
    parts = _shared(rubric, reference, context)
    shown = "\n\n".join(_tagged("candidate", text, label) for label, text in labelled)
    parts.append(f"{CANDIDATES_INTRO}\n{shown}")
    labels = ", ".join(label for label, _ in labelled)
    parts.append(BLIND_OUTPUT.format(labels=labels, fields=_fields(rubric)))
    return [
        {"role": "system", "content": JUDGE_SYSTEM},
        {"role": "user", "content": "\n\n".join(parts)},
    ]
