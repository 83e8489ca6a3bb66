"""Two correctness rubrics for short answers to questions about a conversation, one lenient
and one strict, so that a set of answers can be judged under both side by side.

Published LoCoMo figures disagree by tens of points largely because of how generous the
judge is told to be. `LENIENT_RUBRIC` accepts an answer that points at the same thing as
the reference even when it is vaguer, longer or in another format; `STRICT_RUBRIC` accepts
only an answer that states what the reference states, as specifically, with nothing that
conflicts with it. Both score `correct` 0 or 1 (the wording is our own); a judge's
false-accept rate on known-wrong answers (`judging.calibration`) says how far to trust each.
"""

from __future__ import annotations

from dialogbench.judging.rubric import Dimension, Rubric

LENIENT_CORRECT = Dimension(
    name="correct",
    low=0,
    high=1,
    criteria=(
        "1: the candidate refers to the same thing, person, place, time or amount as the "
        "reference. It may be vaguer, longer, partly incomplete or phrased differently; a "
        "date may be written in another format or relative to another day as long as it "
        "lands on the same time. 0: it is about something else, contradicts the reference, "
        "or declines to answer."
    ),
)

LENIENT_RUBRIC = Rubric(
    name="answer-lenient",
    instructions=(
        "A system answered a question about a conversation. Decide whether its answer "
        "touches on the same fact as the reference answer. Be generous about wording, "
        "length, detail and format; judge only whether it is about the same fact."
    ),
    dimensions=(LENIENT_CORRECT,),
    compares_to="reference",
)

STRICT_CORRECT = Dimension(
    name="correct",
    low=0,
    high=1,
    criteria=(
        "1: the candidate states every fact in the reference, at least as specifically "
        "(the same name, the same number, a date to the same day, month or year the "
        "reference gives), and adds nothing that conflicts with it. 0: it misses a part of "
        "the reference, is vaguer than the reference, hedges between options, adds a claim "
        "that contradicts it, is about something else, or declines to answer."
    ),
)

STRICT_RUBRIC = Rubric(
    name="answer-strict",
    instructions=(
        "A system answered a question about a conversation. Decide whether its answer is "
        "fully right when held against the reference answer. Wording may differ; facts, "
        "precision and completeness may not."
    ),
    dimensions=(STRICT_CORRECT,),
    compares_to="reference",
)

QA_RUBRICS: dict[str, Rubric] = {"lenient": LENIENT_RUBRIC, "strict": STRICT_RUBRIC}
"""The rubric set by its short name, in the order the figures are shown."""
