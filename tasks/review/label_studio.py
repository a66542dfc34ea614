"""A review round as Label Studio projects (the ``review`` extra: ``label-studio-sdk``): one project per kind of
item, with a labeling configuration written for it (the machine's text and its source, right to left where the
language is; the kind's questions; the verdict, the fixed text, the reason), a task per item holding its hash and
its reviewers; the annotations come back through the SDK as the same decisions table the sheets give
(:func:`pull_decisions`). The projects' ids are kept in the round's ``label_studio.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

import pandas as pd

from ..imports import one_import_at_a_time
from .decisions import DECISION_COLUMNS, check_decisions
from .items import QUESTIONS, base_kind, verdicts
from .sheets import right_to_left

PROJECTS_FILE = "label_studio.json"


def _client(url: str, token: str) -> Any:
    with one_import_at_a_time():
        from label_studio_sdk import LabelStudio
    return LabelStudio(base_url=url, api_key=token)


def _direction(lang: str) -> str:
    return "rtl" if right_to_left(lang) else "ltr"


def _text(name: str, value: str, lang: str) -> str:
    """A text shown in its language's direction (a style's value is not filled from the task: it is written)."""
    return (
        f'<View style="direction: {_direction(lang)}; text-align: start; font-size: 1.15em" dir="{_direction(lang)}">'
        f'<Text name="{name}" value="${value}"/></View>'
    )


def labeling_config(kind: str, lang: str, source_lang: str) -> str:
    """The labeling configuration of a kind of item whose machine text is in ``lang`` and its source in
    ``source_lang``: what the reviewer reads (each in its direction), then the questions and the verdict (each
    required; the fixed text and the reason are free text, asked for by the verdict's hint)."""
    blind = base_kind(kind) == "names"  # a name is judged blind: no group, no classifier verdict shown
    parts = [
        '<View style="max-width: 60em">',
        '<Header value="$title"/>',
        '<Text name="task_note" value="$note"/>',
        *(() if blind else ('<Header value="Source" size="5"/>', _text("source", "source_text", source_lang))),
        f'<Header value="{"The first name to judge" if blind else "What the machine wrote (judge this)"}" size="5"/>',
        _text("output", "machine_output", lang),
        *(
            ()
            if blind
            else (
                '<Header value="Stereotype tested (judge the text, not the belief)" size="6"/>',
                _text("stereotype", "stereotype", source_lang),
                '<Header value="Checks it already passed, and what else you need" size="6"/>',
                '<Text name="rules" value="$rules"/>',
                f'<View style="white-space: pre-wrap; direction: {_direction(source_lang)}; text-align: start" '
                f'dir="{_direction(source_lang)}"><Text name="details" value="$details"/></View>',
            )
        ),  # a name's details are its choices: the radio buttons below
    ]
    for question in QUESTIONS[base_kind(kind)]:
        parts.append(f'<Header value={quoteattr(question.text)} size="5"/>')
        if question.choices:
            choices = "".join(f"<Choice value={quoteattr(c)}/>" for c in question.choices)
            parts.append(
                f'<Choices name="{question.key}" toName="output" choice="single-radio" required="true" '
                f'showInline="true">{choices}</Choices>'
            )
        else:
            parts.append(
                f'<Choices name="{question.key}" toName="output" choice="single-radio" required="true" '
                f'value="$choices"/>'
            )
    allowed = verdicts(kind)
    choices = "".join(f"<Choice value={quoteattr(v)}/>" for v in allowed)
    parts += [
        '<Header value="Verdict: accept keeps the text; fix replaces it with yours (below); reject drops the item '
        '(say why below)" size="5"/>'
        if "fix" in allowed
        else '<Header value="Verdict: accept keeps the name for the group and gender you read; reject takes it out '
        '(say why below)" size="5"/>',
        f'<Choices name="verdict" toName="output" choice="single-radio" required="true" showInline="true">'
        f"{choices}</Choices>",
    ]
    if "fix" in allowed:
        parts += [
            '<Header value="Your corrected text (only for fix'
            + ("; a context keeps {stereo} and {nonstereo})" if base_kind(kind) == "contexts" else ")")
            + '" size="6"/>',
            f'<View style="direction: {_direction(lang)}" dir="{_direction(lang)}">',
            '<TextArea name="fix_text" toName="output" rows="3" maxSubmissions="1" editable="true"/>',
            "</View>",
        ]
    parts += [
        '<Header value="Why (only for reject)" size="6"/>',
        '<TextArea name="reason" toName="output" rows="2" maxSubmissions="1" editable="true"/>',
        "</View>",
    ]
    return "\n".join(parts)


def tasks_of(items: pd.DataFrame, assignment: pd.DataFrame, round_id: str) -> list[dict[str, Any]]:
    """A Label Studio task per item: its fields and its hash; not who else reviews it, and for a name (judged
    blind) not the group it is meant to signal (``source``). Which annotator may decide it is the round's
    assignment, kept by the lead (:func:`annotation_decisions`)."""
    counts = assignment.groupby(["kind", "item_id"]).size().to_dict()
    tasks = []
    for item in items.itertuples(index=False):
        choices = item.details.removeprefix("choices: ").split("; ") if item.details.startswith("choices: ") else []
        shown = item._asdict()
        if base_kind(item.kind) == "names":
            del shown["source"]
        n_reviewers = counts.get((item.kind, item.item_id), 0)
        tasks.append(
            {
                "data": {
                    **shown,
                    "round_id": round_id,
                    "title": f"{item.kind} · {item.item_id}",
                    "note": f"Round {round_id}. {n_reviewers} reviewers judge this item, each on their own. "
                    "Answer every question, then the verdict.",
                    "choices": [{"value": c} for c in choices],
                }
            }
        )
    return tasks


def create_project(
    url: str, token: str, meta: dict, items: pd.DataFrame, assignment: pd.DataFrame, title: str | None = None
) -> str:
    """A project per kind of the round's items, its tasks imported; each kind's project address, the ids also in
    ``label_studio.json`` of the round folder when ``meta`` says where it is (``folder``)."""
    client = _client(url, token)
    ids = {}
    for kind, rows in items.groupby("kind", sort=True):
        project = client.projects.create(
            title=f"{title or meta['round_id']} · {kind}"[:50],
            label_config=labeling_config(str(kind), rows["lang"].iloc[0], rows["source_lang"].iloc[0]),
            description=f"PBBQ review round {meta['round_id']}: {len(rows)} items of {kind}, "
            f"each for {meta.get('overlap', 2)} reviewers.",
            maximum_annotations=int(meta.get("overlap", 2)),
            show_skip_button=False,
        )
        client.projects.import_tasks(id=project.id, request=tasks_of(rows, assignment, meta["round_id"]))
        ids[str(kind)] = int(project.id)
    if "folder" in meta:
        (Path(meta["folder"]) / PROJECTS_FILE).write_text(json.dumps({"url": url, "projects": ids}, indent=2) + "\n")
    return ", ".join(f"{kind}: {url}/projects/{number}" for kind, number in ids.items())


def _value(result: list[dict], name: str) -> str:
    for region in result:
        if region.get("from_name") == name:
            value = region.get("value", {})
            found = value.get("choices") or value.get("text") or [""]
            return str(found[0]).strip()
    return ""


def annotation_decisions(tasks: list[dict], usernames: dict[int, str], assignment: pd.DataFrame) -> pd.DataFrame:
    """The decisions of the annotations of ``tasks`` (``data`` and ``annotations`` as the API gives them): the
    annotator's Label Studio username is the reviewer; an annotation of an item not given to its annotator, or
    cancelled (skipped), is no decision."""
    given = {(r.reviewer, r.kind, r.item_id): r.hash for r in assignment.itertuples(index=False)}
    rows = []
    for task in tasks:
        data = task["data"]
        for annotation in task.get("annotations") or []:
            if annotation.get("was_cancelled"):
                continue
            reviewer = usernames.get(annotation.get("completed_by"), str(annotation.get("completed_by")))
            if given.get((reviewer, data["kind"], data["item_id"])) != data["hash"]:
                continue
            result = annotation.get("result") or []
            answers = {q.key: _value(result, q.key) for q in QUESTIONS[base_kind(data["kind"])]}
            rows.append(
                {
                    "round_id": data["round_id"],
                    "reviewer": reviewer,
                    "kind": data["kind"],
                    "item_id": data["item_id"],
                    "hash": data["hash"],
                    "verdict": _value(result, "verdict"),
                    "fix_text": _value(result, "fix_text"),
                    "reason": _value(result, "reason"),
                    "answers": json.dumps({k: v for k, v in answers.items() if v}, ensure_ascii=False, sort_keys=True),
                }
            )
    return pd.DataFrame(rows, columns=DECISION_COLUMNS).astype(str)


def pull_decisions(url: str, token: str, meta: dict, assignment: pd.DataFrame) -> pd.DataFrame:
    """The annotations of the round's projects (``label_studio.json``), through the SDK, as decisions."""
    where = Path(meta["folder"]) / PROJECTS_FILE
    if not where.is_file():
        raise ValueError(f"{where}: not found; run pbbq review label-studio on this round first")
    projects = json.loads(where.read_text(encoding="utf-8"))["projects"]
    client = _client(url, token)
    usernames = {int(u.id): str(u.username) for u in client.users.list()}
    tasks = []
    for project in projects.values():
        for task in client.tasks.list(project=project, fields="all"):
            annotations = [a.model_dump() if hasattr(a, "model_dump") else dict(a) for a in task.annotations or []]
            tasks.append({"data": dict(task.data), "annotations": annotations})
    return check_decisions(annotation_decisions(tasks, usernames, assignment), where)
