"""The listener that puts a run into the history database.

It gathers what the events say about each finished check (its cases, the cards it ran on, the
image on its host) and writes the run once, when it ends, in one transaction. It decides no
outcome, and a history that cannot be written changes no verdict and no exit code: the failure
becomes :attr:`HistoryRecorder.error`, which the run reports (stderr and ``summary.json``).
"""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from typing import TYPE_CHECKING, Sequence

from harness.core.events import CheckFinished, CheckStarted, ImageReady, RunFinished
from harness.core.inventory import Host
from harness.core.records import CaseRecord, RunInfo, case_records
from harness.core.secretref import Masker
from harness.core.spec import JobSpec

if TYPE_CHECKING:
    from harness.history.store import History


def job_ref(job: JobSpec) -> str:
    """What the image was built from, as the history compares it: the git ref, the wheel's
    version, or "" for a local checkout (its image digest tells its builds apart)."""
    if job.image.git and job.image.ref:
        return job.image.ref
    if job.image.wheel:
        return f"ttnn=={job.image.wheel}"
    return ""


class HistoryRecorder:
    def __init__(self, history: "History", job: JobSpec, hosts: Sequence[Host], run_id: str, started: str, masker: Masker):
        self.history = history
        self.job = job
        self.hosts = {host.name: host for host in hosts}
        self.run_id = run_id
        self.started = started
        self.masker = masker
        self.ref = job_ref(job)
        self.records: list[CaseRecord] = []
        self.recorded = False
        self.error = ""  # why the run is not in the history ("" when it is, or not yet written)
        self._devices: dict[tuple[str, str], tuple[int, ...]] = {}
        self._images: dict[str, str] = {}
        self._retries: dict[str, int] = {}  # check -> attempts retried on another host so far
        self._lock = threading.Lock()  # checks finish on many worker threads

    def on_event(self, event) -> None:
        with self._lock:
            if isinstance(event, CheckStarted):
                self._devices[(event.host, event.check)] = event.devices
            elif isinstance(event, ImageReady):
                self._images[event.host] = event.digest
            elif isinstance(event, CheckFinished):
                self._add(event)
        if isinstance(event, RunFinished):
            self._write(event)

    def _add(self, event: CheckFinished) -> None:
        devices = self._devices.get((event.host, event.check), ())
        common = dict(
            board=self._board(event.host, devices), device=",".join(map(str, devices)),
            image_digest=self._images.get(event.host, ""), ref=self.ref,
            log=f"{self.run_id}/{event.host}/{event.check}", mask=self.masker.text,
        )
        if event.retried:
            # An environment fault retried elsewhere is still this host's outcome: without it
            # the host's env-fault rate would miss every fault the retry papered over.
            self._retries[event.check] = self._retries.get(event.check, 0) + 1
            self.records.extend(case_records(self.run_id, self.job.name, event.host, event.retried, **common))
        retries = self._retries.get(event.check, 0)
        for record in case_records(self.run_id, self.job.name, event.host, event.cases, **common):
            self.records.append(dataclasses.replace(record, attempt=record.attempt + retries) if retries else record)

    def _board(self, host_name: str, devices: tuple[int, ...]) -> str:
        host = self.hosts.get(host_name)
        if host is None:
            return ""
        used = [board.type for board in host.boards if set(board.devices) & set(devices)]
        return ",".join(dict.fromkeys(used or host.board_types()))

    def _write(self, event: RunFinished) -> None:
        digests = Counter(self._images.values())
        run = RunInfo(
            self.run_id, self.job.name, self.started, event.finished, event.exit_code,
            digests.most_common(1)[0][0] if digests else "", self.ref,
        )
        try:
            with self._lock:
                records = list(self.records)
            self.history.record(run, records)
            self.recorded = True
        except Exception as exc:  # noqa: BLE001 - a history failure must never change the run
            from harness.history.store import HistoryError  # loaded already: self.history is one

            # A HistoryError already names the database; anything else is a bug of ours, said in one line.
            why = str(exc) if isinstance(exc, HistoryError) else f"history {self.history.display}: {type(exc).__name__}: {exc}"
            self.error = f"run {self.run_id} not recorded: {why}"
