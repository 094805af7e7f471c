"""Device leases: a lock per card on the host, held by the process that runs the check.

A check that uses cards runs on the host as ``flock`` on each card's lock file (in ascending
order, so two runs never deadlock), then a small ``sh`` that says it holds them and starts the
``docker run``. The locks belong to those processes: when the check ends, or the processes die
for any reason, the kernel releases them, so a killed run never leaves a stale lease behind.
Another run (from this machine or any other) that wants the card waits up to the lease wait,
then gives up with :data:`BUSY_EXIT` without the "held" line: ``env_fault/device-busy``.

The same ``sh`` watches its stdin, the harness's lifeline to the host
(:class:`~harness.execution.transport.Lifeline`): when it closes while the container still runs
(the check was cancelled, the harness was killed or lost its connection) it removes the
container itself, then exits, giving up the leases. Pure: this module only builds the argv.
"""

from __future__ import annotations

from typing import Sequence

LEASE_DIR = "/tmp/tt-harness-leases"  # one lock file per /dev/tenstorrent/N, on each host
DEFAULT_WAIT = 600.0  # seconds a check waits for a card another run holds
BUSY_EXIT = 98  # flock gave up waiting (PROBE_EXIT is 97; Docker uses 125-127)
HELD = "harness-lease: held"
WAITING = "harness-lease: waiting for"

# $1 lock folder, then the command (flocks, then the holder). Made world-writable (sticky) so
# every user's runs share the same locks; names the locks someone else holds before waiting.
_PREPARE = r"""
dir=$1; shift
mkdir -p "$dir" 2>/dev/null && chmod 1777 "$dir" 2>/dev/null
for a in "$@"; do
  case $a in "$dir"/*) flock -n "$a" true 2>/dev/null || printf '%s %s\n' "harness-lease: waiting for" "$a" >&2 ;; esac
done
exec "$@"
""".strip()

# $1 container name, $2 the docker command (words), then the docker run argv.
_HOLD = r"""
name=$1 docker=$2; shift 2
printf 'harness-lease: held %s\n' "${HARNESS_LEASE:-no device}" >&2
exec 3<&0  # the lifeline; background jobs get /dev/null as stdin
"$@" 3<&- &
child=$!
( cat <&3 >/dev/null
  if kill -0 "$child" 2>/dev/null; then $docker rm -f "$name" >/dev/null 2>&1; kill "$child" 2>/dev/null; fi
) >/dev/null 2>&1 &
watch=$!
wait "$child"; status=$?
kill "$watch" 2>/dev/null
exit "$status"
""".strip()


def lock_file(device: int) -> str:
    return f"{LEASE_DIR}/device-{device}.lock"


def leased_argv(
    docker_run: Sequence[str], *, name: str, devices: Sequence[int], wait: float, docker: Sequence[str] = ("docker",)
) -> list[str]:
    """``docker_run`` wrapped so it runs holding a lease on ``devices`` (none: only watched)."""
    if any(not isinstance(d, int) or isinstance(d, bool) or d < 0 for d in devices):
        raise ValueError(f"device numbers are whole numbers >= 0, got {list(devices)!r}")
    locks: list[str] = []
    for device in sorted(set(devices)):
        locks += ["flock", "-w", f"{max(wait, 0):g}", "-E", str(BUSY_EXIT), lock_file(device)]
    # The docker command's words are split by the shell: endpoints hold no spaces.
    hold = ["sh", "-c", _HOLD, "harness-lease", name, " ".join(docker), *docker_run]
    held = "devices " + ",".join(str(d) for d in sorted(set(devices))) if devices else "no device"
    return ["env", f"HARNESS_LEASE={held}", "sh", "-c", _PREPARE, "harness-lease", LEASE_DIR, *locks, *hold]


def lease_held(stderr: Sequence[str]) -> bool:
    return any(line.startswith(HELD) for line in stderr)
