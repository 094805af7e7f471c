"""Slurm, as data: the clusters an inventory names, the config lines for its hosts, and the
texts Slurm answers with (``scontrol``, ``squeue --json``), read without running anything.

Facts this module relies on (measured on Debian 12's Slurm 22.05, see README "Slurm"):

- cards are a generic GRES ``tenstorrent`` with the board as its type; gres.conf lists each
  ``/dev/tenstorrent/N`` as a ``File``. A ``File`` missing when ``slurmd`` starts makes slurmd
  exit (one dead card takes the whole node offline), so a node's lines name only the device
  files it really has;
- generic GRES sets no environment variable naming the card: the index comes from
  ``scontrol -d show job`` (``GRES=tenstorrent:n150:1(IDX:1)``);
- nodes need more CPUs than cards, or jobs queue on CPUs instead of cards.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from harness.core import outcomes
from harness.core.outcomes import (
    Attempt,
    CaseResult,
    EnvCategory,
    Evidence,
    HarnessErrorKind,
    KnownBug,
    Outcome,
    Verdict,
)

GRES_NAME = "tenstorrent"
DRAIN_PREFIX = "[tt-harness]"
JOB_LABEL = "slurm.job"  # every container a Slurm job starts carries it: the epilog finds them by it
DEVICE_DIR = "/dev/tenstorrent"
MAX_REASON = 240  # Slurm keeps reasons short; the report has the detail
# Minutes a job may run beyond its checks' timeouts: lease wait aside, preflight and the
# container's start; `--time` bounds the allocation, the check's own timeout bounds the check.
TIME_MARGIN_SECONDS = 120
# Slurm job states that end a job, and what each means for the check it ran.
FINISHED_STATES = frozenset({
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",
    "OUT_OF_MEMORY", "SPECIAL_EXIT", "REVOKED",
})
_FEATURE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class SlurmCluster:
    """A cluster an inventory names (``slurm:``): where to submit, and where results land."""

    name: str
    login: object  # a harness.core.inventory.Host: the login node, reached like any host
    shared_dir: str  # a folder every node and the login node see alike (results, job inputs)
    partitions: Mapping[str, str] = field(default_factory=dict)  # board type -> partition
    nodes: tuple[str, ...] = ()  # the inventory's hosts that are its nodes; () = every host with a board
    node_command: tuple[str, ...] = ("tt-harness-node",)  # the harness's node entry point on the nodes

    def partition(self, board: str) -> str | None:
        return self.partitions.get(board)


@dataclass(frozen=True)
class NodeLines:
    """One node as Slurm is told about it."""

    name: str
    cards: Mapping[str, tuple[int, ...]]  # board type -> /dev/tenstorrent/N numbers present
    features: tuple[str, ...] = ()
    address: str | None = None  # NodeAddr, when the name does not resolve
    cpus: int = 0  # 0: twice the cards, at least 2 (more CPUs than cards)
    missing: tuple[int, ...] = ()  # device numbers the inventory names but the node lacks


def feature(text: str) -> str:
    """A label, board or arch as a Slurm feature name (letters, digits, ``_.-``)."""
    return _FEATURE.sub("_", text)


def node_cpus(node: NodeLines) -> int:
    cards = sum(len(d) for d in node.cards.values())
    return node.cpus or max(2, 2 * cards + 2)


def config_lines(
    nodes: Sequence[NodeLines],
    partitions: Mapping[str, str],
    *,
    healthcheck: str | None = None,
    epilog: str | None = None,
    health_interval: int = 60,
) -> tuple[list[str], list[str]]:
    """``slurm.conf`` and ``gres.conf`` lines for ``nodes``: GRES per board, features, one
    partition per board, and the harness's health check and epilog. Only device files a node
    has are listed: a missing one would stop its slurmd."""
    conf = [
        f"GresTypes={GRES_NAME}",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
    ]
    if healthcheck:
        conf += [f"HealthCheckProgram={healthcheck}", f"HealthCheckInterval={health_interval}", "HealthCheckNodeState=ANY"]
    if epilog:
        conf.append(f"Epilog={epilog}")
    gres = []
    for node in nodes:
        parts = [f"NodeName={node.name}"]
        if node.address:
            parts.append(f"NodeAddr={node.address}")
        parts.append(f"CPUs={node_cpus(node)}")
        counts = [f"{GRES_NAME}:{board}:{len(devices)}" for board, devices in node.cards.items() if devices]
        if counts:
            parts.append("Gres=" + ",".join(counts))
        if node.features:
            parts.append("Features=" + ",".join(dict.fromkeys(feature(f) for f in node.features)))
        parts.append("State=UNKNOWN")
        if node.missing:
            conf.append(f"# {node.name}: {', '.join(f'{DEVICE_DIR}/{n}' for n in node.missing)} missing: not listed")
        conf.append(" ".join(parts))
        for board, devices in node.cards.items():
            for device in devices:
                gres.append(f"NodeName={node.name} Name={GRES_NAME} Type={board} File={DEVICE_DIR}/{device}")
    boards = list(dict.fromkeys(board for node in nodes for board in node.cards))
    for i, board in enumerate(boards):
        members = [node.name for node in nodes if board in node.cards]
        name = partitions.get(board, default_partition(board))
        default = " Default=YES" if i == 0 else ""
        conf.append(f"PartitionName={name} Nodes={','.join(members)}{default} MaxTime=INFINITE State=UP")
    return conf, gres


def default_partition(board: str) -> str:
    """One partition per board, named as tt-metal's own Slurm port names them (wh-n150...)."""
    return f"wh-{board}"


def time_limit(timeout: float, attempts: int = 1) -> int:
    """``--time`` in minutes for a job running ``attempts`` runs of a check with ``timeout``."""
    return max(1, math.ceil((timeout * attempts + TIME_MARGIN_SECONDS) / 60))


def gres_request(board: str, count: int) -> str:
    return f"{GRES_NAME}:{board}:{count}"


def expand_range(text: str) -> list[str]:
    """Slurm's bracket ranges, one group: ``sim-wh-[01-03,05]`` -> names; no brackets -> itself."""
    match = re.fullmatch(r"(.*?)\[([0-9,\-]+)\](.*)", text)
    if not match:
        return [text]
    head, spec, tail = match.groups()
    out = []
    for part in spec.split(","):
        low, _, high = part.partition("-")
        if not low:
            continue
        width = len(low)
        for n in range(int(low), int(high or low) + 1):
            out.append(f"{head}{n:0{width}d}{tail}")
    return out


def expand_hostlist(text: str) -> list[str]:
    """A Slurm host list (``a,b-[1-2]``): every name, commas inside brackets kept."""
    names, depth, current = [], 0, ""
    for char in text:
        if char == "," and depth == 0:
            names.append(current)
            current = ""
            continue
        depth += {"[": 1, "]": -1}.get(char, 0)
        current += char
    names.append(current)
    return [name for part in names if part for name in expand_range(part)]


def gres_devices(gres_conf: str, node: str) -> tuple[tuple[str, int], ...]:
    """(type, device number) of every ``tenstorrent`` card gres.conf gives ``node``."""
    found = []
    for raw in gres_conf.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        if fields.get("Name") != GRES_NAME or "File" not in fields:
            continue
        if "NodeName" in fields and node not in expand_hostlist(fields["NodeName"]):
            continue
        for path in expand_range(fields["File"]):
            number = path.rpartition("/")[2]
            if path.startswith(DEVICE_DIR + "/") and number.isdigit():
                found.append((fields.get("Type", ""), int(number)))
    return tuple(found)


def allocated_devices(show_job: str, node: str | None = None, job_id: str | None = None) -> tuple[int, ...]:
    """The card numbers ``scontrol -d show job`` says the job holds (on ``node``, if given):
    ``GRES=tenstorrent:n150:2(IDX:0-1)`` -> (0, 1). ``job_id``: only that job's record (asked
    for an array's id, scontrol shows every element of the array, each on its own cards)."""
    found: list[int] = []
    lines = show_job.splitlines()
    if job_id is not None:
        records = re.split(r"(?m)^(?=JobId=)", show_job)
        mine = [r for r in records if re.match(rf"JobId={re.escape(job_id)}\b", r)]
        lines = mine[0].splitlines() if mine else []
    for line in lines:
        if node is not None and "Nodes=" in line:
            nodes = re.search(r"\bNodes=(\S+)", line)
            if nodes and node not in expand_hostlist(nodes.group(1)):
                continue
        for spec in re.findall(rf"\b{GRES_NAME}(?::[^:(\s]+)?:\d+\(IDX:([0-9,\-]+)\)", line):
            for part in spec.split(","):
                low, _, high = part.partition("-")
                found.extend(range(int(low), int(high or low) + 1))
    return tuple(dict.fromkeys(found))


def show_fields(text: str) -> dict[str, str]:
    """``scontrol show node|job`` output as key -> value. ``Reason=`` takes the rest of its line
    (reasons have spaces)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("Reason="):
            fields["Reason"] = stripped[len("Reason="):]
            continue
        for key, value in re.findall(r"(\w[\w/:]*)=(\S*)", stripped):
            fields.setdefault(key, value)
    return fields


def node_state(text: str) -> tuple[set[str], str]:
    """(state flags, reason) of ``scontrol show node NAME``: e.g. ({"IDLE", "DRAIN"}, "...")."""
    fields = show_fields(text)
    flags = set(filter(None, re.split(r"[+]", fields.get("State", "").upper())))
    reason = re.sub(r"\s*\[[^\]]*@[^\]]*\]\s*$", "", fields.get("Reason", "")).strip()  # drop [user@time]
    return flags, "" if reason == "(null)" else reason


def job_exit_status(text: str) -> int | None:
    """The exit status of a job's script from ``scontrol show job ID`` (``ExitCode=3:0``), or
    None when it names none or the job ended by a signal."""
    found = re.fullmatch(r"(\d+):(\d+)", show_fields(text).get("ExitCode", ""))
    return int(found.group(1)) if found and found.group(2) == "0" else None


def drain_reason(failed: Iterable[str]) -> str:
    """The reason a node is drained with: ``[tt-harness]`` and the failed preflight checks."""
    text = f"{DRAIN_PREFIX} preflight failed: " + "; ".join(failed)
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."


def drained_by_us(flags: set[str], reason: str) -> bool:
    return bool(flags & {"DRAIN", "DRAINED", "DRAINING"}) and reason.startswith(DRAIN_PREFIX)


def is_drained(flags: set[str]) -> bool:
    return bool(flags & {"DRAIN", "DRAINED", "DRAINING"})


@dataclass(frozen=True)
class JobState:
    job_id: int
    state: str  # PENDING, RUNNING, COMPLETED, ...
    reason: str = ""  # Slurm's state_reason (None when it has none)
    nodes: str = ""
    exit_code: int | None = None

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES


def parse_squeue_json(text: str) -> dict[int, JobState]:
    """``squeue --json`` (Slurm 22.05 and later) as job id -> state."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"squeue --json printed no JSON ({exc})") from None
    jobs = {}
    for job in data.get("jobs", []) if isinstance(data, dict) else []:
        if not isinstance(job, dict) or not isinstance(job.get("job_id"), int):
            continue
        state = job.get("job_state", "")
        if isinstance(state, list):  # newer Slurm: a list of flags
            state = state[0] if state else ""
        exit_code = job.get("exit_code")
        if isinstance(exit_code, dict):  # newer Slurm: {"return_code": {"number": ...}}
            exit_code = (exit_code.get("return_code") or {}).get("number")
        jobs[job["job_id"]] = JobState(
            job["job_id"], str(state), str(job.get("state_reason") or ""), str(job.get("nodes") or ""),
            exit_code if isinstance(exit_code, int) else None,
        )
    return jobs


def slurm_verdict(state: JobState) -> Verdict:
    """A job that ended without the harness's result: a Slurm-level failure, never the code's.
    Slurm's own state and reason are the evidence."""
    reason = "" if state.reason in ("", "None") else f" ({state.reason})"
    where = f" on {state.nodes}" if state.nodes else ""
    what = f"Slurm job {state.job_id} ended {state.state}{reason}{where} before the check reported"
    if state.state in ("TIMEOUT", "DEADLINE"):
        return Verdict.env_fault(EnvCategory.TIMEOUT, f"{what}: killed by its --time limit")
    if state.state in ("NODE_FAIL", "BOOT_FAIL"):
        return Verdict.env_fault(EnvCategory.SCHEDULER, f"{what}: the node failed")
    if state.state == "PREEMPTED":
        return Verdict.env_fault(EnvCategory.SCHEDULER, f"{what}: preempted by higher-priority work")
    if state.state == "CANCELLED":
        return Verdict.env_fault(EnvCategory.SCHEDULER, f"{what}: cancelled outside this run")
    return Verdict.env_fault(EnvCategory.SCHEDULER, f"{what}: the node entry point did not finish")


# ---------------------------------------------------------------------------------------------
# Case results through the shared folder: JSON (never pickle: the orchestrator reads what a node
# wrote, and must not run it).


def verdict_to_json(verdict: Verdict) -> dict:
    return {
        "outcome": verdict.outcome.value,
        "category": verdict.category.value if verdict.category is not None else None,
        "message": verdict.message,
        "evidence": [e.to_json() for e in verdict.evidence],
    }


def verdict_from_json(data: Mapping) -> Verdict:
    outcome = Outcome(data["outcome"])
    category = data.get("category")
    if outcome is Outcome.ENV_FAULT:
        category = EnvCategory(category)
    elif outcome is Outcome.ERROR:
        category = HarnessErrorKind(category)
    else:
        category = None
    evidence = tuple(
        Evidence(e.get("line") if isinstance(e.get("line"), int) else None, str(e.get("text", "")), e.get("signature"))
        for e in data.get("evidence", ())
    )
    return Verdict(outcome, category, str(data.get("message", "")), evidence)


def case_to_json(case: CaseResult) -> dict:
    return {
        "name": case.name,
        "classname": case.classname,
        "check": case.check,
        "verdict": verdict_to_json(case.verdict),
        "attempts": [
            {"verdict": verdict_to_json(a.verdict), "duration": a.duration, "output": a.output} for a in case.attempts
        ],
        "duration": case.duration,
        "output": case.output,
        "known_bug": {"reason": case.known_bug.reason, "link": case.known_bug.link} if case.known_bug else None,
    }


def case_from_json(data: Mapping) -> CaseResult:
    """A case a node wrote; ValueError/KeyError/TypeError on anything malformed."""
    bug = data.get("known_bug")
    return CaseResult(
        name=str(data["name"]),
        classname=str(data["classname"]),
        verdict=verdict_from_json(data["verdict"]),
        attempts=tuple(
            Attempt(verdict_from_json(a["verdict"]), float(a.get("duration", 0.0)), str(a.get("output", "")))
            for a in data.get("attempts", ())
        ),
        duration=float(data.get("duration", 0.0)),
        output=str(data.get("output", "")),
        known_bug=KnownBug(str(bug["reason"]), bug.get("link")) if bug else None,
        check=data.get("check"),
    )


def combine_cases(check: str, known_bug: KnownBug | None, results: Iterable[Sequence[CaseResult]]) -> list[CaseResult]:
    """The cases of several runs of one check (a job array's elements, one attempt each),
    combined per test case as the runner combines ``repeat: N`` attempts."""
    by_case: dict[tuple[str, str], list[Attempt]] = {}
    for cases in results:
        for case in cases:
            by_case.setdefault((case.classname, case.name), []).extend(case.attempts or (Attempt(case.verdict, case.duration, case.output),))
    return outcomes.combine_cases(check, known_bug, by_case)
