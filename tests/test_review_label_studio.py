"""A review round through a real Label Studio (issue 37; DESIGN §9): the project made for the round's items, two
reviewers who sign up and annotate through its API as the labeling page does (their own session), and the
annotations pulled back through the SDK into the same decisions table the sheets give.

Runs against the server at ``$LABEL_STUDIO_URL`` with the token ``$LABEL_STUDIO_API_KEY`` (CI starts one on
127.0.0.1 with SQLite: docs/review.md); without them the test is skipped, saying so."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import httpx
import pandas as pd
import pytest

from pbbq.flows.cli import main
from pbbq.tasks.review.agreement import agreement
from pbbq.tasks.review.decisions import load_decisions
from pbbq.tasks.review.items import ITEM_COLUMNS, content_hash
from pbbq.tasks.review.label_studio import PROJECTS_FILE
from pbbq.tasks.review.rounds import assign
from pbbq.tasks.review.sheets import write_round

URL = os.environ.get("LABEL_STUDIO_URL", "")
pytestmark = [
    pytest.mark.label_studio,
    pytest.mark.skipif(
        not (URL and os.environ.get("LABEL_STUDIO_API_KEY")),
        reason="no Label Studio server: set LABEL_STUDIO_URL and LABEL_STUDIO_API_KEY (docs/review.md)",
    ),
]
CONTEXT = "{stereo} نتوانست برنامه را نصب کند، اما {nonstereo} در چند دقیقه نوبتش را گرفت."


def _round(folder: Path, reviewers: list[str]) -> pd.DataFrame:
    rows = [
        dict.fromkeys(ITEM_COLUMNS, "")
        | {"kind": "contexts", "item_id": f"AGE-0{i}-T1:biased", "hash": content_hash(CONTEXT + str(i)),
           "category": "Age", "source": "llm", "lang": "fa", "source_text": "یک {stereo} و یک {nonstereo} در صف بودند.",
           "machine_output": CONTEXT + str(i), "stereotype": "پیرها با فناوری مشکل دارند.",
           "details": "negative question: کدام‌یک نتوانست؟"}
        for i in range(3)
    ]  # fmt: skip
    items = pd.DataFrame(rows)
    assignment = assign(items, reviewers, 2, seed=0)
    write_round(folder, items, assignment, {"round_id": assignment["round_id"][0], "overlap": 2}, ["contexts"])
    return assignment


def _reviewer_session(email: str, password: str) -> httpx.Client:
    """A reviewer who signs up on Label Studio's page and stays logged in, as in a browser."""
    session = httpx.Client(base_url=URL, follow_redirects=True, timeout=60)
    session.get("/user/signup/")
    form = {"email": email, "password": password, "csrfmiddlewaretoken": session.cookies["csrftoken"]}
    session.post("/user/signup/", data=form, headers={"Referer": f"{URL}/user/signup/"})
    assert session.get("/api/current-user/whoami").json()["email"] == email
    return session


def _annotate(session: httpx.Client, task: int, answers: dict[str, str]) -> None:
    """What the labeling page posts on Submit: the task's result, one region per answered control."""
    result = [
        {"from_name": key, "to_name": "output", "type": "textarea" if key in ("fix_text", "reason") else "choices",
         "value": {"text": [value]} if key in ("fix_text", "reason") else {"choices": [value]}}
        for key, value in answers.items()
    ]  # fmt: skip
    headers = {"X-CSRFToken": session.cookies["csrftoken"], "Referer": URL}
    response = session.post(f"/api/tasks/{task}/annotations/", json={"result": result}, headers=headers)
    assert response.status_code == 201, response.text


def test_a_round_in_label_studio_gives_the_decisions_table(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:6]
    reviewers = [f"ana{tag}", f"bob{tag}"]
    assignment = _round(tmp_path, reviewers)
    assert main(["review", "label-studio", str(tmp_path), "--url", URL]) == 0
    project = json.loads((tmp_path / PROJECTS_FILE).read_text())["projects"]["contexts"]
    fix = "={stereo} با اپلیکیشن کنار نیامد، اما {nonstereo} نوبتش را گرفت."
    plan = {
        reviewers[0]: [("accept", "yes"), ("reject", "no"), ("fix", "no")],
        reviewers[1]: [("accept", "yes"), ("reject", "no"), ("fix", "yes")],
    }
    for reviewer, answers in plan.items():
        session = _reviewer_session(f"{reviewer}@review.test", f"{reviewer}-Pass-1234")
        tasks = session.get("/api/tasks/", params={"project": project, "fields": "all"}).json()["tasks"]
        for task in sorted(tasks, key=lambda t: t["data"]["item_id"]):
            verdict, disambiguates = answers[int(task["data"]["item_id"][5])]
            extra = {"fix": {"fix_text": fix}, "reject": {"reason": "کلیشه را وارونه کرده است"}}.get(verdict, {})
            _annotate(
                session, task["id"], {"disambiguates": disambiguates, "natural": "yes", "verdict": verdict} | extra
            )
    assert main(["review", "import", str(tmp_path), "--label-studio", URL]) == 0
    decisions = load_decisions(tmp_path / "decisions.csv")
    assert len(decisions) == 6 and set(decisions["reviewer"]) == set(reviewers)
    assert set(decisions["hash"]) == set(assignment["hash"])
    assert (decisions.loc[decisions["verdict"] == "fix", "fix_text"] == fix).all()
    measured = agreement(decisions).set_index("question")
    # disambiguates: yes/yes, no/no, no/yes over 3 items: alpha = 1 - (2/6)/(2·3·3/(6·5)) = 4/9
    assert measured.loc["disambiguates", "alpha"] == pytest.approx(4 / 9)
    assert measured.loc["verdict", "alpha"] == pytest.approx(1.0)
