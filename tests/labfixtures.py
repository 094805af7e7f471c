"""The simulated lab as a test fixture: the product's own lab (harness/lab), not a test copy.

``sim_lab`` (session): a lab named ``e2e`` with three STAND-IN hosts, healthy; tests put faults
on it and heal them. It FAILS, never skips, when Docker cannot run it. Its keys and inventory live
in a temporary folder, so a developer's own ``sim`` lab on the same machine is left alone.
"""

from __future__ import annotations

import os
from typing import Iterator

import pytest

from harness.lab.sim import LabError, SimLab

# Several checkouts testing on one machine at once each set their own name.
E2E_LAB = os.environ.get("TT_HARNESS_E2E_LAB", "e2e")


def cases(summary: dict, host: str, check: str | None = None) -> list[dict]:
    """The cases of a run's summary.json on ``host`` (of ``check``, when given)."""
    suite = next(s for s in summary["hosts"] if s["host"] == host)
    return [c for c in suite["cases"] if check is None or c["check"] == check]


@pytest.fixture(scope="session")
def sim_lab(tmp_path_factory) -> Iterator[SimLab]:
    lab = SimLab(E2E_LAB, directory=tmp_path_factory.mktemp("lab"))
    try:
        lab.down()  # what an interrupted earlier session left
        lab.up(3)
    except LabError as exc:
        pytest.fail(f"the simulated lab did not come up: {exc}", pytrace=False)
    yield lab
    lab.down()
