"""The build-pbbq deployment, served from ``prefect.yaml`` so its schedule and parameters live in one place."""

from __future__ import annotations

from typing import Any

import yaml

from ..tasks.core.artifacts import REPO_ROOT
from .build_pbbq import build_pbbq

DEPLOYMENT_NAME = "build-pbbq"


def deployment_spec() -> dict[str, Any]:
    spec = yaml.safe_load((REPO_ROOT / "prefect.yaml").read_text(encoding="utf-8"))
    return next(d for d in spec["deployments"] if d["name"] == DEPLOYMENT_NAME)


def serve_build() -> None:
    """Serve ``build-pbbq/build-pbbq`` until interrupted: it runs on its cron schedule and whenever
    ``prefect deployment run build-pbbq/build-pbbq`` asks."""
    spec = deployment_spec()
    schedule = spec["schedules"][0]
    build_pbbq.serve(
        name=DEPLOYMENT_NAME,
        cron=schedule["cron"],
        parameters=spec.get("parameters") or {},
        description=spec.get("description"),
    )
