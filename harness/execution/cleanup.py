"""Leftovers of earlier runs on a host: containers and work folders nobody runs any more.

A run's containers carry the label ``harness.run`` and its work folders are
``/tmp/harness-<run id>-<check>-XXXXXX`` (they may hold a check's ``secrets.env``). Either is a
leftover once no process on the host still runs that run's ``docker run`` (a live run keeps its
docker client and lease holder, whose command lines name the container and the run). So a
cleanup never touches a run that is still going, from this machine or any other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from harness.execution.transport import Transport

# $1.. the docker command's words. Prints one line per thing removed.
_CLEANUP = r"""
for name in $("$@" ps -a --filter label=harness.run --format '{{.Names}}'); do
  if ps -eo args= | grep -F -e "--name $name " | grep -vq grep; then continue; fi
  "$@" rm -f "$name" >/dev/null 2>&1 && echo "container $name"
done
for d in /tmp/harness-*; do
  [ -d "$d" ] || continue
  run=$(printf '%s\n' "${d#/tmp/harness-}" | sed -n 's/^\([0-9]\{8\}T[0-9]\{6\}Z-[0-9a-f]\{6\}\)-.*/\1/p')
  [ -n "$run" ] || continue
  if ps -eo args= | grep -F -e "harness.run=$run" | grep -vq grep; then continue; fi
  rm -rf -- "$d" && echo "folder $d"
done
""".strip()


@dataclass(frozen=True)
class Cleaned:
    host: str
    removed: tuple[str, ...]


def cleanup(transport: Transport, docker: Sequence[str], timeout: float = 300) -> Cleaned:
    """Remove the leftovers of dead runs on the host behind ``transport``."""
    removed: list[str] = []
    transport.run(["sh", "-c", _CLEANUP, "cleanup", *docker], timeout=timeout, on_stdout=removed.append)
    return Cleaned(transport.name, tuple(line for line in removed if line.strip()))
