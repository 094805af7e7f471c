"""The faults the simulated lab can put on a host: a catalog as data (configs/lab-faults.yaml).

Each fault names the ``env_fault`` category the harness must report for a host carrying it; the
host side (``tt-sim fault NAME`` in harness/lab/hostimage) makes the change a real host would show.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Mapping

from harness.core.configs import config_path
from harness.core.errors import InputError
from harness.core.outcomes import EnvCategory
from harness.core.yamlnodes import Fields, did_you_mean, load_file


@dataclass(frozen=True)
class Fault:
    name: str
    category: EnvCategory  # what the harness must call a host with this fault
    effect: str  # what changes on the host


def load_faults(path: str) -> Mapping[str, Fault]:
    root = Fields(load_file(path), "lab fault catalog", required=("faults",))
    faults = {}
    categories = tuple(c.value for c in EnvCategory)
    for name, node in root.req("faults").as_map("faults").items():
        f = Fields(node, f"fault {name}", required=("category", "effect"))
        category = f.req("category").as_choice("category", categories)
        faults[name] = Fault(name, EnvCategory(category), " ".join(f.req("effect").as_str("effect").split()))
    return faults


@functools.lru_cache(maxsize=None)
def default_faults() -> Mapping[str, Fault]:
    return load_faults(str(config_path("lab-faults.yaml")))


def fault_named(name: str) -> Fault:
    """The catalog's fault ``name``, or an input error listing the known ones."""
    faults = default_faults()
    if name not in faults:
        raise InputError.at(
            str(config_path("lab-faults.yaml")), 1, 1,
            f"unknown lab fault {name!r}{did_you_mean(name, tuple(faults))}; known: {', '.join(faults)}",
        )
    return faults[name]
