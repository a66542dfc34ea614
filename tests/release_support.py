"""Small valid releases for the publish and card tests: example rows of the release schema, three configs of
them, a funnel and a build id."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from pbbq.tasks.core.artifacts import StageOutput, atomic_write_bytes
from pbbq.tasks.core.schemas import EXAMPLE
from pbbq.tasks.instantiate import answer_role
from pbbq.tasks.publish import RELEASE_DATA, publish, release_data
from pbbq.tasks.publish.dataset_card import CardParams
from pbbq.tasks.publish.release import SHARD_ROWS, ReleaseFolder, RunInputs, data_part, write_release
from pbbq.tasks.text.categories import CATEGORIES
from tests.bbq_records import CELLS, PERMUTATIONS

BUILD = "20250101-000000-abc123"
ROLE_NAMES = {"stereo": "stereotyped", "nonstereo": "non-stereotyped", "unknown": "unknown"}


def make_examples(n: int, *, lang: str = "fa", variant: str = "original", salt: str = "") -> pd.DataFrame:
    """``n`` valid example rows (tasks.schemas.EXAMPLE), in an order that is not the example_id order."""
    rows = []
    for i in range(n):
        template = f"T{i // 12:03d}"
        condition, assignment, polarity = CELLS[i % len(CELLS)]
        roles = PERMUTATIONS[(i // len(CELLS)) % len(PERMUTATIONS)]
        stereo, nonstereo = f"گروه {i % 5}", f"گروه دیگر {i % 3}"
        texts = {"stereotyped": stereo, "non-stereotyped": nonstereo, "unknown": "مشخص نیست"}
        tags = {"stereotyped": f"گروه-{i % 5}", "non-stereotyped": f"گروه-دیگر-{i % 3}", "unknown": "unknown"}
        digest = hashlib.sha256(f"{lang}|{variant}|{salt}|{i}".encode()).hexdigest()[:12]
        rows.append(
            {
                "example_id": f"{template}-{digest}",
                "template_id": template,
                "stereotype_id": f"S{i // 24:03d}",
                "category": CATEGORIES[(i // 12) % len(CATEGORIES)],
                "question_index": template,
                "question_polarity": polarity,
                "context_condition": condition,
                "context": f"{stereo} و {nonstereo} در صف نانوایی بودند. ({salt}{i})",
                "question": "چه کسی بی‌ادب بود؟" if polarity == "neg" else "چه کسی مؤدب بود؟",
                "ans0": texts[roles[0]],
                "ans1": texts[roles[1]],
                "ans2": texts[roles[2]],
                "label": roles.index(ROLE_NAMES[answer_role(condition, assignment, polarity)]),
                "answer_info": {f"ans{k}": [texts[role], tags[role]] for k, role in enumerate(roles)},
                "additional_metadata": {
                    "subcategory": "None",
                    "stereotyped_groups": [tags["stereotyped"]],
                    "version": "pbbq-1",
                    "source": f"S{i // 24:03d} (expert)",
                },
                "answer_roles": {f"ans{k}": role for k, role in enumerate(roles)},
                "target_loc": roles.index("stereotyped"),
                "assignment": assignment,
                "entity_order": "stereo_first" if i % 2 == 0 else "nonstereo_first",
                "stereo_entity": stereo,
                "nonstereo_entity": nonstereo,
                "lexical_variant": "" if i % 3 else "صبح",
                "lang": lang,
                "variant": variant,
                "source_example_id": None if variant == "original" else f"T{i // 12:03d}-source{i}",
                "llm_request_ids": [f"req-{digest}"] if condition == "disambig" else [],
            }
        )
    return pd.DataFrame(rows, columns=EXAMPLE.names)


def make_configs(salt: str = "") -> dict[str, pd.DataFrame]:
    return {
        "fa": make_examples(30, salt=salt),
        "fa-names": make_examples(25, variant="names-7271", salt=salt),
        "en": make_examples(20, lang="en", salt=salt),
    }


FUNNEL = pd.DataFrame(
    [
        ("candidates", 12),
        ("surveyed", 10),
        ("accepted", 8),
        ("templates", 5),
        ("gated", 4),
        ("instantiated_templates", 3),
        ("examples", 30),
    ],
    columns=["step", "count"],
)


def write_inputs(tmp_path: Path) -> tuple[Path, Path]:
    """A run's manifest and transcript under ``tmp_path/run``, as publish reads them."""
    manifest = tmp_path / "run" / "manifest.json"
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({"run_id": BUILD, "status": "built", "stages": []}) + "\n", encoding="utf-8")
    transcript = tmp_path / "run" / "transcript.jsonl"
    transcript.write_text('{"records": 1, "transcript": "pbbq", "version": 1}\n{"key": "req-1"}\n', encoding="utf-8")
    return manifest, transcript


def run_inputs(tmp_path: Path, table1: pd.DataFrame) -> dict[str, Any]:
    """Publish's per-run inputs (:class:`pbbq.tasks.publish.PublishRun`) for a release whose Table 1 is ``table1``:
    the run's manifest and transcript (:func:`write_inputs`), the sample's build config, no Table 2."""
    manifest, transcript = write_inputs(tmp_path)
    return {
        "table1": table1,
        "table2": None,
        "funnel": FUNNEL,
        "manifest_path": manifest,
        "transcript_path": transcript,
        "build_id": BUILD,
        "build_config": "configs/sample.toml",
    }


def build_release(
    out_dir: Path,
    configs: Mapping[str, pd.DataFrame],
    *,
    card: CardParams,
    table1: pd.DataFrame,
    funnel: pd.DataFrame,
    table2: pd.DataFrame | None = None,
    manifest_path: Path | None = None,
    transcript_path: Path | None = None,
    shard_rows: int = SHARD_ROWS,
    synthetic: bool = False,
    stand_in: bool = False,
    **run: Any,
) -> ReleaseFolder:
    """The release folder ``out_dir/hub/`` of ``configs`` (``run``: the other fields of ``RunInputs``), its data
    part made in memory: ``data_part``, then ``write_release``."""
    data = data_part(configs, shard_rows)
    return write_release(
        out_dir,
        data.files,
        data.infos,
        lambda path, target: atomic_write_bytes(target, data.data[path]),
        RunInputs(
            table1=table1,
            table2=table2,
            funnel=funnel,
            manifest_path=manifest_path,
            transcript_path=transcript_path,
            **run,
        ),
        card=card,
        synthetic=synthetic,
        stand_in=stand_in,
    )


def publish_stage(out_dir: Path, examples: pd.DataFrame, configs: Sequence[str] = (), **run: Any) -> StageOutput:
    """Publish as a build does, in its two stages: the data part (``release_data``) written where the runner
    puts it (``10_data`` beside ``out_dir``), then ``publish`` (``run``: the fields of ``PublishRun``)."""
    data = release_data(examples, configs)
    for path, content in data.files.items():
        atomic_write_bytes(out_dir.parent / RELEASE_DATA.folder / path, content)  # a new file: no link changes
    return publish(out_dir, data.report, data.tables["release_files"], **run)
