"""DEMO's element-awareness track: the model under test reads a whole dialogue and answers
one of four tasks about it (goal recognition, persona modelling, scene reconstruction,
utterance mining); a judge scores each answer against the gold.

Two protocols (`--protocol`):

    schema (default)  our prompt asks for a JSON object with exactly the fields the gold
                      holds (labels listed where a field has a closed set), checked against
                      the item's answer schema (`Model.generate_structured`; 0-10 integers
                      checked); an answer that still fails after `max_fixes` corrections is
                      kept with its raw text, counted `prediction_unparsed`, and judged as
                      written; it is a failed call of the model (kind `unparseable`,
                      `schema` or `range`), so the run exits 3 and a rerun asks for it
                      again (`retry` in the prediction counts the earlier askings).
    paper             DEMO's own released instruction (`AwarenessItem.instruction`, only on
                      items from DEMO's files), sent as the one user message as DEMO's code
                      does: a free-form answer, no schema, no field list, no correction; every
                      answer is judged as written. Its JSON, where one can be read in the
                      paper's shape, feeds the objective metrics; an answer without one is
                      counted `prediction_unparsed` (and judged all the same).

Per item:

    verdict      a `Judge` with two 0-10 dimensions (appendix F): `accuracy` (agreement
                 with the gold) and `hallucination` (10: nothing beyond the gold). The
                 item's score is their mean (`aggregate.item_score`); an unscored verdict is
                 kept with its raw text and counted. Only an answer that never came (a
                 failed call) goes unjudged; a rerun asks for it again.
    objective    every gold field with a closed label set (`AwarenessItem.options`):
                 whether the predicted label is right; `goal_completion` and
                 `familiarity`: the absolute error.

The judged means count every judged answer, unparsed ones as the judge scored them, as
DEMO's judge does (leaving them out would flatter a model that cannot keep a format);
`score_parsed_only` beside each task's score leaves them out, and counts.json says how many
there were.

Labels. Gold and predicted labels are matched to the label set the same way,
`data.demo.labels.match_label`: after normalising case, spaces, `_`/`-`, quotes and a final
full stop, and through the loaders' own readings of gender, level, sentiment and age band
(`M`, `boy` -> male, `高` -> high, `积极` -> positive, ...). A label still outside the set
is valid JSON, not a schema error: it is kept as given and counted as a wrong answer (and
`out_of_set`) by the objective metrics; the judge sees it.

Objective metrics, per language and field (persona fields pool both participants, e.g.
`gender`, `big_five.openness`): accuracy and macro-F1 (the standard definition, as
scikit-learn's `f1_score(average="macro")`: the mean of the per-label F1 over every label
seen in the gold or the predictions; a label outside the set is a label of its own, with
F1 0), with intervals from resampling items; mean absolute error for the numeric fields. Beside
each, the baseline of a model that ignores the dialogue: `majority_accuracy` (always the
most frequent gold label) and `median_mae` (always the gold's median).

Units: one per item, in task x language order. `solve` asks the model under test (the
prediction and its objective outcomes); `score` asks the judge, so a new judge re-judges
saved predictions without calling the model under test.

RUN_DIR/manifest.json   dataset name and sha256, config, the model and judge roles, prompt
                        sha256, seed, package version
RUN_DIR/items.jsonl     one record per item: ids, task, lang, the gold the judge sees, the
                        prediction (raw and parsed, error), the judge fields
                        (`judging.verdict_fields`), the item's score, objective outcomes
RUN_DIR/summary.json    judge: lang -> task -> accuracy, hallucination, score; awareness:
                        lang -> the paper's table half (`aggregate.AwarenessTable`);
                        objective: lang -> field -> metrics; every figure with its interval
RUN_DIR/counts.json     lang -> task -> items, prediction_unparsed, prediction_call_failed,
                        unparsed_scored (judged as written), judge_unscored, scored
RUN_DIR/usage.json      calls and tokens per role (model, judge) and stage (the runner's)
RUN_DIR/warnings.json   data warnings, unparsed predictions, unscored verdicts, labels
                        outside their set
RUN_DIR/parts/          solved.jsonl and scored.jsonl, one line per item; a rerun keeps them
"""

from __future__ import annotations

import functools
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, create_model
from rich.table import Table

from dialogbench.data.demo.items import PARTICIPANTS, get_path
from dialogbench.data.demo.labels import match_label
from dialogbench.data.demo.model import TASKS, TRAITS, AwarenessItem, DemoSet, Task
from dialogbench.data.demo.release import normalise_gold
from dialogbench.data.errors import DataError
from dialogbench.judging import is_unscored, verdict_fields
from dialogbench.judging.judge import Judge
from dialogbench.lang import Lang
from dialogbench.models.structured import Structured, extract_json
from dialogbench.models.types import ChatMessage
from dialogbench.report.table import summary_table
from dialogbench.runner import Outcome, Plan, TrackBase, option, register
from dialogbench.runner import config as shared
from dialogbench.runner.roles import judge_role, model_role
from dialogbench.runner.track import Models, Rows
from dialogbench.stats.bootstrap import (
    Estimate,
    bootstrap_means,
    nan_estimate,
    percentile_estimate,
    resample_counts,
)
from dialogbench.stats.classification import macro_f1
from dialogbench.tracks.common import dataset_info, judged_values, stratified_limit
from dialogbench.tracks.demo import awareness_prompts as ap
from dialogbench.tracks.demo.aggregate import AwarenessTable, awareness_table, item_score

TRACK = "demo-awareness"
LANGS: tuple[Lang, ...] = ("en", "zh")
NUMERIC = tuple(n for fields in ap.TASK_FIELDS.values() for n, k in fields.items() if k == "score")
"""Numeric gold fields (`goal_completion`, `familiarity`), scored by absolute error."""
PREDICT_TAG, JUDGE_TAG = "awareness:predict", "awareness:judge"
FREE_FORM_UNREAD = "no JSON answer in the paper's shape could be read (judged as written)"
Protocol = Literal["schema", "paper"]
"""How an item is asked (module docstring): our schema-checked prompt, or DEMO's own."""

# -- answer schemas -------------------------------------------------------------------------

Score = Annotated[int, Field(ge=0, le=10)]


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")


class StanceAnswer(_Answer):
    aspect: str
    viewpoint: str


class StrategyAnswer(_Answer):
    description: str
    type: str | None = None


class StrategyWithTypeAnswer(_Answer):
    description: str
    type: str


KIND_TYPES: dict[ap.Kind, Any] = {
    "text": str,
    "label": str,
    "score": Score,
    "lines": list[str],
    "two_lines": Annotated[list[str], Field(min_length=2, max_length=2)],
    "stance": list[StanceAnswer],
    "strategy": StrategyAnswer,
}
"""The reply type of each field kind (`traits` and participants are nested models)."""

Shape = dict[str, Any]
"""The fields an item asks: name -> None (a leaf), "typed" (a strategy with its type) or
the nested shape (a participant, the Big Five)."""


def _where(item: AwarenessItem, source: str) -> dict[str, str]:
    return {"path": source, "record": f"item {item.id} ({item.task}, {item.lang})"}


def asked_shape(item: AwarenessItem, source: str = "dataset") -> Shape:
    """The fields `item.gold` holds, checked against the task's fields (DataError if not)."""

    def leaves(gold: Mapping[str, Any], allowed: Mapping[str, str], prefix: str) -> Shape:
        unknown = sorted(set(gold) - set(allowed))
        if unknown:
            raise DataError(
                **_where(item, source),
                problem=f"gold keys {unknown} are not {item.task} fields",
                field=f"gold.{prefix}{unknown[0]}",
                fix=f"use only {list(allowed)}",
            )
        shape: Shape = {}
        for name in allowed:
            if name not in gold:
                continue
            if allowed[name] == "traits":
                traits = gold[name]
                bad = sorted(set(traits) - set(TRAITS)) if isinstance(traits, dict) else ["?"]
                if bad or not traits:
                    raise DataError(
                        **_where(item, source),
                        problem=f"big_five must map traits {list(TRAITS)} to a level",
                        field=f"gold.{prefix}{name}",
                        fix="give {trait: high|low} for the traits the source labels",
                    )
                shape[name] = {t: None for t in TRAITS if t in traits}
            elif allowed[name] == "strategy":
                has_type = isinstance(gold[name], dict) and "type" in gold[name]
                shape[name] = "typed" if has_type else None
            else:
                shape[name] = None
        return shape

    if item.task != "persona":
        shape = leaves(item.gold, ap.TASK_FIELDS[item.task], "")
        if item.task == "utterance" and not {"person", "content"} <= set(shape):
            raise DataError(
                **_where(item, source),
                problem="an utterance item's gold needs the speaker and the text",
                field="gold.person",
                fix="set gold.person and gold.content to the target utterance's",
            )
    else:
        unknown = sorted(set(item.gold) - set(PARTICIPANTS))
        if unknown or not item.gold or not all(isinstance(p, dict) for p in item.gold.values()):
            raise DataError(
                **_where(item, source),
                problem=f"a persona gold holds objects under {list(PARTICIPANTS)} only",
                field="gold",
                fix="put each participant's fields under participant1 / participant2",
            )
        shape = {
            key: leaves(person, ap.PERSON_FIELDS, f"{key}.") for key, person in item.gold.items()
        }
    if not shape:
        raise DataError(
            **_where(item, source),
            problem="the gold holds no field to ask for",
            field="gold",
            fix="leave out items whose source labels nothing for the task",
        )
    return shape


def _required(fields: Mapping[str, ap.Kind], shape: Shape, name: str) -> type[BaseModel]:
    """A model `name` with exactly the fields of `shape`, each required, typed by its kind
    in `fields` (a nested shape: the Big Five's traits, or a participant's fields)."""
    defs: dict[str, Any] = {}
    for key, sub in shape.items():
        nested = name.removesuffix("Answer") + key.title().replace("_", "") + "Answer"
        if key in PARTICIPANTS:
            annotation: Any = _required(ap.PERSON_FIELDS, sub, nested)
        elif isinstance(sub, dict):  # the Big Five: each trait a label
            annotation = _required(dict.fromkeys(sub, "label"), sub, nested)
        elif sub == "typed":
            annotation = StrategyWithTypeAnswer
        else:
            annotation = KIND_TYPES[fields[key]]
        defs[key] = (annotation, ...)
    model: type[BaseModel] = create_model(name, __base__=_Answer, **defs)
    return model


@functools.lru_cache(maxsize=256)
def _schema_for(task: Task, shape_json: str) -> type[BaseModel]:
    fields = ap.TASK_FIELDS.get(task, {})  # persona: participants, typed in `_required`
    return _required(fields, json.loads(shape_json), f"{task.title()}Answer")


def answer_schema(item: AwarenessItem) -> type[BaseModel]:
    """The schema an item's reply must satisfy: the gold's fields, all required."""
    return _schema_for(item.task, json.dumps(asked_shape(item)))


# -- labels ---------------------------------------------------------------------------------


def field_name(path: str) -> str:
    """The pooled field of an option path: `participant2.big_five.openness` ->
    `big_five.openness`."""
    head, _, rest = path.partition(".")
    return rest if head in PARTICIPANTS and rest else path


def objective_outcomes(
    item: AwarenessItem, answer: Mapping[str, Any] | None, source: str = "dataset"
) -> dict[str, dict[str, Any]]:
    """Per gold path: label fields (gold, prediction as given, matched label, correct) and
    numeric fields (gold, prediction, abs_error); prediction entries None when unparsed."""
    out: dict[str, dict[str, Any]] = {}
    for path, labels in item.options.items():
        gold = get_path(item.gold, path)
        if gold is None:
            continue
        gold_label = match_label(gold, labels)
        if gold_label is None:
            raise DataError(
                **_where(item, source),
                problem=f"gold label {gold!r} is not in its label set {labels}",
                field=f"gold.{path}",
                fix=f"add it to options[{path!r}] or map it to one of the labels",
            )
        pred = get_path(answer, path)
        label = match_label(pred, labels)
        out[path] = {
            "kind": "label",
            "gold": gold_label,
            "pred": pred,
            "label": label,
            "correct": None if answer is None else label == gold_label,
        }
    for path in NUMERIC:
        if path not in item.gold:
            continue
        gold = item.gold[path]
        if isinstance(gold, bool) or not isinstance(gold, int | float) or not 0 <= gold <= 10:
            raise DataError(
                **_where(item, source),
                problem=f"{path} is {gold!r}, not a number from 0 to 10",
                field=f"gold.{path}",
                fix="give the score as an integer from 0 to 10",
            )
        pred = get_path(answer, path)
        error = abs(float(pred) - float(gold)) if isinstance(pred, int | float) else None
        out[path] = {"kind": "number", "gold": gold, "pred": pred, "abs_error": error}
    return out


FloatArray = npt.NDArray[np.float64]


# -- the run --------------------------------------------------------------------------------


@dataclass(frozen=True)
class AwarenessConfig(shared.Checked, shared.Sampled, shared.Judged):
    """Tasks, a limit, and the model settings (temperature 0, as in the paper)."""

    tasks: tuple[Task, ...] = option(TASKS, help="the awareness tasks to ask")
    protocol: Protocol = option(  # noqa: RUF009  (an option field, like the others)
        "schema",
        help="schema: our prompt asks for the gold's fields as JSON, checked against a schema; "
        "paper: DEMO's released instruction, a free-form answer, judged as written (DEMO's "
        "own files only)",
    )
    limit: int | None = shared.limit("items, drawn in turn from each task x language")
    seed: int = shared.seed("the item draw, the model calls and the bootstrap")
    n_boot: int = shared.n_boot()
    temperature: float = shared.temperature(0.0, "the model's sampling temperature")
    max_tokens: int = shared.tokens(1024, "the answer's token budget")
    judge_max_tokens: int = shared.tokens(1024, "the verdict's token budget", stage="score")
    max_fixes: int = shared.fixes(
        2, "corrections asked for an invalid answer (and an unusable verdict)", max=20
    )


@dataclass
class AwarenessResult:
    """The track's figures as written to the run folder."""

    summary: dict[str, Any]
    counts: dict[str, dict[str, dict[str, int]]]
    usage: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    dataset: str = ""

    @property
    def tables(self) -> dict[str, AwarenessTable]:
        """Language -> the paper's element-awareness half (task means and their average)."""
        tables: dict[str, AwarenessTable] = self.summary["awareness"]
        return tables


def part_name(task: str, lang: str) -> str:
    return f"{task}-{lang}"


def select_items(demo_set: DemoSet, config: AwarenessConfig) -> list[AwarenessItem]:
    """The configured tasks' items, at most `limit`, drawn in turn from each task x lang."""
    items = [i for i in demo_set.items if i.task in config.tasks]
    groups = [(t, lang) for t in config.tasks for lang in LANGS]
    return stratified_limit(items, lambda i: (i.task, i.lang), config.limit, config.seed, groups)


def participant_names(demo_set: DemoSet) -> dict[str, tuple[str, str]]:
    """Dialogue id -> the names of participant 1 and 2."""
    return {d.id: (d.participants[0].name, d.participants[1].name) for d in demo_set.dialogues}


def _names(item: AwarenessItem, known: Mapping[str, tuple[str, str]]) -> tuple[str, str] | None:
    if item.dialogue_id in known:
        return known[item.dialogue_id]
    first, second = (get_path(item.gold, f"{p}.name") for p in PARTICIPANTS)
    return (first, second) if isinstance(first, str) and isinstance(second, str) else None


def unit_key(item: AwarenessItem) -> str:
    """An item's unit: its part (task x language) and id."""
    return f"{part_name(item.task, item.lang)}:{item.id}"


class AwarenessTrack(TrackBase[AwarenessConfig, AwarenessItem]):
    """One unit per item: the model answers it (solve), the judge scores the answer (score)."""

    name = TRACK
    summary = (
        "DEMO element awareness: infer goals, personas, scenes and utterance labels from "
        "whole dialogues; judged against the gold, and scored objectively on its labels."
    )
    config_type = AwarenessConfig
    roles = (
        model_role("the model under test"),
        judge_role("the judge of the answers"),
    )
    corpus = "demo"
    judged = True

    def plan(self, data: DemoSet, config: AwarenessConfig) -> Plan[AwarenessItem]:
        items = select_items(data, config)
        if not items:
            raise ValueError(f"dataset {data.name!r} has no items for tasks {config.tasks}")
        for item in items:  # bad gold fails here, before anything is written or asked
            asked_shape(item, str(data.source))
            objective_outcomes(item, None, str(data.source))
            if config.protocol == "paper" and not (item.instruction and item.released_answer):
                raise DataError(
                    **_where(item, str(data.source)),
                    problem="--protocol paper asks DEMO's released instruction and gold "
                    "answer, and this item lacks "
                    + ("them" if not item.instruction else "its released answer")
                    + " (it does not come from DEMO's files)",
                    field="instruction" if not item.instruction else "answer",
                    fix="run DEMO's element_awareness_*.json files with --protocol paper, or "
                    "use --protocol schema (our prompt) for other corpora",
                )
        order = {
            part_name(t, lang): k
            for k, (t, lang) in enumerate((t, lang) for t in config.tasks for lang in LANGS)
        }
        ordered = sorted(items, key=lambda i: order[part_name(i.task, i.lang)])  # stable
        units: dict[str, AwarenessItem] = {}
        for item in ordered:
            key = unit_key(item)
            n = 1
            while key in units:  # a repeated id: each item still its own unit
                n += 1
                key = f"{unit_key(item)}#{n}"
            units[key] = item
        info = dataset_info(data, len({i.dialogue_id for i in items}))
        return Plan(
            units,
            warnings=list(data.warnings),
            resolved={"prompt_sha256": _prompt_sha256(config), "items": len(items)},
            context=(data.name, participant_names(data)),
            dataset=info,
        )

    async def solve(
        self,
        unit: AwarenessItem,
        models: Models,
        config: AwarenessConfig,
        plan: Plan[AwarenessItem],
    ) -> Rows:
        """The item's prediction and its objective outcomes (the verdict comes in `score`)."""
        item, names = unit, plan.context[1]
        if config.protocol == "paper":
            got_text = await models["model"].generate_parsed(
                [{"role": "user", "content": item.instruction or ""}],
                _as_written,
                _never_corrected,
                config.generate_config(),
                max_fixes=0,
                tag=PREDICT_TAG,
            )
            answer = free_form_answer(item, got_text.raw) if got_text.ok else None
            if got_text.ok and answer is None:
                got_text = got_text.model_copy(update={"error": FREE_FORM_UNREAD})
            got: Structured[Any] = got_text
        else:
            messages = ap.prediction_messages(item, _names(item, names))
            got = await models["model"].generate_structured(
                messages,
                answer_schema(item),
                config.generate_config(),
                max_fixes=config.max_fixes,
                tag=PREDICT_TAG,
            )
            answer = got.value.model_dump(exclude_none=True) if got.value is not None else None
        row = {
            "id": item.id,
            "dialogue_id": item.dialogue_id,
            "task": item.task,
            "lang": item.lang,
            "target": item.target,
            "gold": item.gold,
            **({"released_answer": item.released_answer} if config.protocol == "paper" else {}),
            "prediction": {
                "parsed": answer,
                "raw": got.raw,
                "error": got.error,
                "attempts": got.attempts,
                **({"retry": got.retry} if got.retry else {}),
            },
            "objective": objective_outcomes(item, answer),
        }
        return [row]

    async def score(
        self,
        unit: AwarenessItem,
        rows: Rows,
        models: Models,
        config: AwarenessConfig,
        plan: Plan[AwarenessItem],
    ) -> Rows:
        """The judge's verdict on the answer (`judged_text`; none when no answer came): the
        common judge fields (`judging.verdict_fields`) and the item's score, then the
        objective outcomes."""
        solved = rows[0]
        candidate = judged_text(solved["prediction"], config.protocol)
        if candidate is None:
            fields = verdict_fields(None, skipped="the model call failed: no answer to judge")
        elif config.protocol == "paper":  # DEMO's set-up: the gold as released, their criteria
            judge = Judge(
                models["judge"],
                ap.PAPER_RUBRICS[unit.task],
                config.judge_config(),
                max_fixes=config.max_fixes,
            )
            verdict = await judge.score(
                candidate,
                reference=unit.released_answer,
                context=ap.paper_judge_context(unit),
                tag=JUDGE_TAG,
            )
            fields = verdict_fields(verdict)
        else:
            judge = Judge(
                models["judge"],
                ap.RUBRICS[unit.lang][unit.task],
                config.judge_config(),
                max_fixes=config.max_fixes,
            )
            verdict = await judge.score(candidate, reference=_as_json(unit.gold), tag=JUDGE_TAG)
            fields = verdict_fields(verdict)
        row = {k: v for k, v in solved.items() if k != "objective"}
        row.update(fields, score=item_score(fields["judge_scores"]), objective=solved["objective"])
        return [row]

    def aggregate(self, plan: Plan[AwarenessItem], rows: Rows, config: AwarenessConfig) -> Outcome:
        parts: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            parts.setdefault(part_name(row["task"], row["lang"]), []).append(row)
        result = summarise(parts, config)
        result.dataset = plan.context[0]
        outcome = Outcome(
            summary=result.summary,
            files={"counts.json": result.counts},
            warnings=result.warnings,
            result=result,
            failures=_failures(result.counts),
        )
        return outcome

    def show(self, outcome: Outcome, config: AwarenessConfig) -> list[Table | str]:
        result: AwarenessResult = outcome.result
        shown: list[Table | str] = []
        for lang, tasks_of in result.summary["judge"].items():
            title = f"Element awareness on {result.dataset} ({lang}), judge 0-10"
            shown.append(_table(title, tasks_of, "task"))
            table = result.tables[lang]
            shown.append(f"{lang}: awareness average {_fmt(table.average)} over {table.averaged}")
            objective = {
                name: {k: v for k, v in metrics.items() if isinstance(v, Estimate)}
                for name, metrics in result.summary["objective"].get(lang, {}).items()
            }
            if objective:
                shown.append(
                    _table(
                        f"Objective metrics against the labels ({lang}); macro_f1 averages "
                        "every label seen in the gold or the predictions",
                        objective,
                        "field",
                    )
                )
            shown.append(f"counts ({lang}): {result.counts.get(lang, {})}")
        return shown

    def judgments(self, rows: Rows) -> dict[str, float]:
        """Item (part:id) -> its judged score (the mean of accuracy and hallucination)."""
        return judged_values(
            rows, lambda r: f"{part_name(r['task'], r['lang'])}:{r['id']}", "score"
        )

    def headline(self, outcome: Outcome) -> dict[str, float]:
        """Per language: each task's mean score and the awareness average."""
        result: AwarenessResult = outcome.result
        out: dict[str, float] = {}
        for lang, table in result.tables.items():
            for task, e in table.tasks.items():
                out[f"{lang} {task}"] = e.value
            out[f"{lang} awareness average"] = table.average.value
        return out


AWARENESS = register(AwarenessTrack())


def _failures(counts: Mapping[str, Mapping[str, Mapping[str, int]]]) -> dict[str, int]:
    """Rows that could not be scored, by cause."""
    tasks = [c for by_task in counts.values() for c in by_task.values()]
    found = {
        "predictions whose call failed": sum(c["prediction_call_failed"] for c in tasks),
        "verdicts unscored": sum(c["judge_unscored"] for c in tasks),
    }
    return {cause: n for cause, n in found.items() if n}


def _table(title: str, table: Mapping[str, Mapping[str, Estimate]], row_label: str) -> Table:
    columns = list(dict.fromkeys(col for row in table.values() for col in row))
    return summary_table(title, table, columns, row_label=row_label)


def _fmt(e: Estimate) -> str:
    return f"{e.value:.3f} [{e.ci_low:.3f}, {e.ci_high:.3f}] (n={e.n})"


def _prompt_sha256(config: AwarenessConfig) -> str:
    return ap.PAPER_PROMPT_SHA256 if config.protocol == "paper" else ap.PROMPT_SHA256


def _as_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)


def _as_written(raw: str) -> str:
    """The free-form protocol's parser: every reply is an answer, as written."""
    return raw


def _never_corrected(error: str) -> ChatMessage:  # pragma: no cover (max_fixes=0)
    raise AssertionError(f"a free-form answer is never sent back ({error})")


def free_form_answer(item: AwarenessItem, raw: str) -> dict[str, Any] | None:
    """The fields a free-form answer holds, read as DEMO's files are read (a JSON object,
    fenced or not, in the paper's shape, normalised like the gold); None when there is no
    JSON object in it or it cannot be read that way. It feeds the objective metrics only:
    the judge sees the answer as written."""
    try:
        data = extract_json(raw)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    try:
        answer = normalise_gold(item.task, data, Path("answer"), item.id, Counter())
    except (DataError, TypeError, ValueError, AttributeError, KeyError):
        return None
    return answer or None


def judged_text(prediction: Mapping[str, Any], protocol: str) -> str | None:
    """What the judge reads: the answer as written (paper protocol, and an answer that never
    fitted the schema), else the parsed answer as JSON; None when no answer came (a failed
    call: not judged, done again on a rerun)."""
    parsed, raw = prediction["parsed"], prediction.get("raw") or ""
    if protocol != "paper" and parsed is not None:
        return _as_json(parsed)
    return raw if raw.strip() else None


# -- figures --------------------------------------------------------------------------------


def _column(rows: Sequence[Mapping[str, Any]], key: str) -> FloatArray:
    values = [(r["judge_scores"] or {}).get(key) for r in rows]
    return np.array([math.nan if v is None else v for v in values], dtype=np.float64)


def judge_summary(
    rows: Sequence[Mapping[str, Any]], score: Estimate, n_boot: int, seed: int
) -> dict[str, Estimate]:
    """Accuracy and hallucination over the scored items, and `score`, their per-item mean,
    as the paper table bootstrapped it (one figure, one interval); every judged answer
    counts, unparsed ones as the judge scored them (DEMO's way). `score_parsed_only` is the
    mean over the answers that parsed, beside it: the gap shows what unparsed answers cost."""
    parsed = np.array(
        [
            math.nan if r["score"] is None or r["prediction"]["parsed"] is None else r["score"]
            for r in rows
        ],
        dtype=np.float64,
    )
    cols = np.column_stack([_column(rows, "accuracy"), _column(rows, "hallucination"), parsed])
    acc, hal, parsed_only = bootstrap_means(cols, n_boot=n_boot, seed=seed)
    return {"accuracy": acc, "hallucination": hal, "score": score, "score_parsed_only": parsed_only}


def label_metrics(
    outcomes: Sequence[tuple[str, dict[str, Any]]], n_boot: int, seed: int
) -> dict[str, Any]:
    """Accuracy and macro-F1 of one label field from (item id, outcome) pairs; resampling
    items, so both participants of a persona item are drawn together."""
    scored = [(i, o) for i, o in outcomes if o["correct"] is not None]
    result: dict[str, Any] = {
        "n": len(scored),
        "unparsed": len(outcomes) - len(scored),
        "out_of_set": sum(1 for _, o in scored if o["label"] is None),
        "labels": sorted({o["gold"] for _, o in outcomes}),
    }
    if not scored:
        result.update(accuracy=nan_estimate(), macro_f1=nan_estimate())
        return result
    ids = [i for i, _ in scored]
    correct = np.array([float(o["correct"]) for _, o in scored])
    golds = [o["gold"] for _, o in scored]
    majority = max(sorted(set(golds)), key=golds.count)
    constant = np.array([float(g == majority) for g in golds])
    both = np.column_stack([correct, constant])
    result["accuracy"], result["majority_accuracy"] = bootstrap_means(
        both, ids, n_boot=n_boot, seed=seed
    )
    result["majority_label"] = majority
    predicted = [predicted_label(o) for _, o in scored]
    index = {label: k for k, label in enumerate(sorted(set(golds) | set(predicted)))}
    gold = np.array([index[g] for g in golds], dtype=np.int64)
    pred = np.array([index[p] for p in predicted], dtype=np.int64)
    units, unit = np.unique(np.asarray(ids), return_inverse=True)
    counts = resample_counts(len(units), n_boot, np.random.default_rng(seed))[:, unit]
    point = float(macro_f1(gold, pred)[0])
    result["macro_f1"] = percentile_estimate(point, macro_f1(gold, pred, counts), len(scored))
    return result


def predicted_label(outcome: Mapping[str, Any]) -> str:
    """The label a prediction counts as: the matched label, or, outside the set, the answer
    as given (each distinct one a label of its own, as scikit-learn would see it)."""
    if outcome["label"] is not None:
        return str(outcome["label"])
    pred = outcome["pred"]
    return f"<outside the set: {pred if isinstance(pred, str) else json.dumps(pred)}>"


def number_metrics(
    outcomes: Sequence[tuple[str, dict[str, Any]]], n_boot: int, seed: int
) -> dict[str, Any]:
    """Mean absolute error of one numeric field, and that of always answering the gold's
    median (how far a model that ignores the dialogue would get)."""
    scored = [o for _, o in outcomes if o["abs_error"] is not None]
    golds = np.array([float(o["gold"]) for o in scored])
    median = float(np.median(golds)) if len(golds) else math.nan
    errors = np.column_stack([[o["abs_error"] for o in scored], np.abs(golds - median)])
    mae, median_mae = bootstrap_means(errors, n_boot=n_boot, seed=seed)
    return {
        "n": len(scored),
        "unparsed": len(outcomes) - len(scored),
        "mae": mae,
        "median_mae": median_mae,
        "median": median,
    }


def objective_summary(
    rows: Sequence[Mapping[str, Any]], n_boot: int, seed: int
) -> dict[str, dict[str, Any]]:
    """Field -> metrics, over the rows of one language."""
    by_field: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for r in rows:
        for path, outcome in r["objective"].items():
            by_field.setdefault(field_name(path), []).append((r["id"], outcome))
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(by_field):
        outcomes = by_field[name]
        if outcomes[0][1]["kind"] == "number":
            out[name] = number_metrics(outcomes, n_boot, seed)
        else:
            out[name] = label_metrics(outcomes, n_boot, seed)
    return out


def summarise(
    parts: Mapping[str, Sequence[Mapping[str, Any]]], config: AwarenessConfig
) -> AwarenessResult:
    """Figures from the stored parts (one per task x language), languages apart."""
    judge: dict[str, dict[str, Any]] = {}
    objective: dict[str, Any] = {}
    tables: dict[str, AwarenessTable] = {}
    counts: dict[str, dict[str, dict[str, int]]] = {}
    notes: list[str] = []
    n_boot, seed = config.n_boot, config.seed
    for lang in LANGS:
        by_task = {t: list(parts.get(part_name(t, lang), [])) for t in config.tasks}
        by_task = {t: rows for t, rows in by_task.items() if rows}
        if not by_task:
            continue
        tables[lang] = awareness_table(
            {t: [r["score"] for r in rows] for t, rows in by_task.items()},
            n_boot=n_boot,
            seed=seed,
        )
        judge[lang] = {
            t: judge_summary(rows, tables[lang].tasks[t], n_boot, seed)
            for t, rows in by_task.items()
        }
        objective[lang] = objective_summary(
            [r for rows in by_task.values() for r in rows], n_boot, seed
        )
        counts[lang] = {}
        for task, rows in by_task.items():
            parsed = [r for r in rows if r["prediction"]["parsed"] is not None]
            c = {
                "items": len(rows),
                "prediction_unparsed": len(rows) - len(parsed),
                "prediction_call_failed": sum(
                    1 for r in rows if (r["prediction"]["error"] or "").startswith("call failed")
                ),
                "unparsed_scored": sum(
                    1 for r in rows if r["prediction"]["parsed"] is None and r["score"] is not None
                ),
                "judge_unscored": sum(1 for r in rows if is_unscored(r)),
                "scored": sum(1 for r in rows if r["score"] is not None),
            }
            counts[lang][task] = c
            where = f"{task} ({lang})"
            if c["prediction_unparsed"]:
                notes.append(
                    f"{where}: {c['prediction_unparsed']} of {len(rows)} answers could not be "
                    f"read as JSON fields; {c['unparsed_scored']} were judged as written and "
                    "count in the judged means (as DEMO's judge does; score_parsed_only leaves "
                    "them out), and they are `unparsed` in the objective metrics"
                )
            if c["judge_unscored"]:
                notes.append(
                    f"{where}: {c['judge_unscored']} verdicts unscored (kept with raw text and "
                    "error; left out of the judge scores)"
                )
        for name, metrics in objective[lang].items():
            if metrics.get("out_of_set"):
                notes.append(
                    f"{name} ({lang}): {metrics['out_of_set']} predicted labels outside the "
                    "label set, counted as wrong"
                )
        if tables[lang].missing:
            why: dict[str, list[str]] = {
                "no item in this run": [t for t in tables[lang].missing if t not in by_task],
                "no scored item": [t for t in tables[lang].missing if t in by_task],
            }
            said = "; ".join(f"{', '.join(ts)} ({w})" for w, ts in why.items() if ts)
            notes.append(
                f"{lang}: the awareness average leaves out {said}, so it is not DEMO's "
                "four-task average"
            )
    summary = {"judge": judge, "awareness": tables, "objective": objective}
    return AwarenessResult(summary=summary, counts=counts, warnings=notes)
