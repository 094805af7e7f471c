"""Which check runs where, on how many devices: the plan of a run, as plain data.

Pure: no I/O. :func:`plan` expands a job over its hosts (``fanout: all`` pins every check to every
host; ``any`` leaves each check to whichever host of the pool is free first). :func:`allocate`
picks the devices of one host a task may use, given what this run already holds there; the host
side (a lock per device, ``harness.execution.lease``) keeps other runs off them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Mapping, Sequence

from harness.core.invocation import needs_card
from harness.core.spec import JobSpec


@dataclass(frozen=True)
class Task:
    """One check to run once (with its repeats) on one host."""

    check: str
    host: str | None  # pinned (fanout all), or None: any host of the pool
    devices: int  # devices it leases; 0 for a check that needs no card
    shared: bool = False  # other containers may use the same devices at once
    excluded: frozenset[str] = frozenset()  # hosts it must not run on (a retry moves off them)
    retry_of: str | None = None  # the host whose environment fault this task retries

    def may_run_on(self, host: str) -> bool:
        return (self.host is None or self.host == host) and host not in self.excluded


def plan(job: JobSpec, hosts: Sequence[str]) -> tuple[Task, ...]:
    """The tasks of ``job`` on ``hosts``, in spec order (host order within a check)."""
    tasks = []
    for check in job.checks:
        devices = job.device.count if job.device is not None and needs_card(job, check) else 0
        shared = bool(job.device and job.device.shared)
        if job.hosts.fanout == "all":
            tasks += [Task(check.name, host, devices, shared) for host in hosts]
        else:
            tasks.append(Task(check.name, None, devices, shared))
    return tuple(tasks)


def allocate(task: Task, devices: Sequence[int], held: Mapping[int, int]) -> tuple[int, ...] | None:
    """The devices of a host ``task`` may take, or None when it must wait.

    ``devices`` are the host's, ``held`` counts the tasks of this run on each. An exclusive task
    takes devices nobody holds; a shared one takes the least used. Only for a task that
    :func:`fits` the host.
    """
    if not fits(task, devices):
        raise ValueError(f"{task.check} needs {task.devices} device(s), the host has {len(devices)}")
    if task.devices == 0:
        return ()
    if task.shared:
        return tuple(sorted(devices, key=lambda d: (held.get(d, 0), d))[: task.devices])
    free = [d for d in devices if not held.get(d, 0)]
    return tuple(free[: task.devices]) if len(free) >= task.devices else None


def fits(task: Task, devices: Sequence[int]) -> bool:
    """Whether a host with ``devices`` can ever run ``task``."""
    return task.devices <= len(devices)


def eligible(task: Task, host: str, quarantined: AbstractSet[str]) -> bool:
    return task.may_run_on(host) and host not in quarantined
