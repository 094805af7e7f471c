"""Preflight: is this host fit to run checks on its cards? Asked before anything runs on it.

One round trip per host: a POSIX ``sh`` script (:data:`GATHER_SCRIPT`) runs over the host's
transport as the argv ``sh -c SCRIPT gather ARGS...``. Every inventory value (device numbers,
paths, the Docker endpoint) travels as a positional argument, never pasted into the script
text. The script prints marked sections of raw facts; :func:`harness.core.hostfacts.parse_gather`
turns them into a :class:`HostFacts` and :func:`harness.core.hostfacts.evaluate` judges them.

The ROOT argument
    On a real host ROOT is ``/``. Any other ROOT is a STAND-IN for a real host: a folder
    holding a fake ``sys/``, ``dev/`` and ``proc/`` tree, read exactly as the real ones would
    be. Tests and the simulated lab use it; nothing else should. Under a stand-in ROOT only
    the card facts are fake: ``tt-smi``, ``docker`` and ``df`` are still whatever the machine
    running the script has (pass ``tt_smi=`` a stand-in tt-smi if the tree needs one).
"""

from __future__ import annotations

import functools
import math
import secrets
from dataclasses import replace
from typing import Mapping, Sequence

from harness.core.hostfacts import (
    GatherError,
    PreflightConfig,
    PreflightReport,
    default_preflight_config,
    evaluate,
    fault,
    parse_gather,
)
from harness.core.inventory import Host
from harness.core.outcomes import EnvCategory
from harness.core.profiles import Board, default_boards, default_profiles
from harness.execution.transport import Transport, TransportError

# Positional arguments: $1 ROOT, $2 NONCE, $3 heartbeat delay (s), $4 tt-smi command ("" : do
# not run it), $5 tt-smi timeout (s), $6 Docker endpoint ("" : the host's default), $7 docker
# timeout (s), then device numbers, then "--", then paths to probe.
# Each section is a line "@@NONCE@@ KEY STATE" and the lines up to the next one; the output
# ends with "@@NONCE@@ end", so a cut-off run is never mistaken for a complete one.
GATHER_SCRIPT = r"""
R=${1%/}
M="@@$2@@"
delay=$3 ttsmi=$4 ttsmi_timeout=$5 docker_host=$6 docker_timeout=$7
shift 7
ids=""
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  case $1 in ''|*[!0-9]*) ;; *) ids="$ids $1" ;; esac
  shift
done
[ "$#" -gt 0 ] && shift
exec 3>&1  # commands' stderr goes straight into the section opened just before them

emit_file() {  # KEY PATH: the file's text, or why there is none
  if [ ! -e "$2" ]; then
    printf '%s %s missing\n' "$M" "$1"
  elif out=$(cat -- "$2" 2>&1); then
    printf '%s %s ok\n%s\n' "$M" "$1" "$out"
  else
    printf '%s %s unreadable\n%s\n' "$M" "$1" "$out"
  fi
}

bounded() {  # SECONDS CMD...: CMD, stopped after SECONDS where timeout(1) exists
  s=$1; shift
  if command -v timeout >/dev/null 2>&1; then timeout "$s" "$@"; else "$@"; fi
}

emit_file kmd.version "$R/sys/module/tenstorrent/version"

if [ -d "$R/dev/tenstorrent" ]; then
  printf '%s dev.nodes ok\n' "$M"
  for e in "$R"/dev/tenstorrent/*; do
    [ -e "$e" ] || [ -L "$e" ] || continue  # an empty folder leaves the pattern unexpanded
    if [ -c "$e" ]; then k=char; elif [ -d "$e" ]; then k=dir; else k=other; fi
    printf '%s %s\n' "$k" "${e##*/}"
  done
else
  printf '%s dev.nodes missing\n' "$M"
fi

heartbeat=""
for n in $ids; do
  d="$R/sys/class/tenstorrent/tenstorrent!$n"
  node="$R/dev/tenstorrent/$n"
  if [ -c "$node" ]; then k=char; elif [ -e "$node" ]; then k=other; else k=missing; fi
  printf '%s dev.%s.node ok\n%s\n' "$M" "$n" "$k"
  if [ -d "$d" ]; then printf '%s sys.%s ok\n' "$M" "$n"; else printf '%s sys.%s missing\n' "$M" "$n"; fi
  for a in tt_card_type tt_fw_bundle_ver tt_heartbeat; do emit_file "sys.$n.$a" "$d/$a"; done
  [ -e "$d/tt_heartbeat" ] && heartbeat=1
  if bdf=$(cd -P -- "$d/device" 2>/dev/null && pwd -P); then
    bdf=${bdf##*/}
    printf '%s pci.%s.bdf ok\n%s\n' "$M" "$n" "$bdf"
    emit_file "pci.$n.iommu_type" "$R/sys/bus/pci/devices/$bdf/iommu_group/type"
  else
    printf '%s pci.%s.bdf missing\n' "$M" "$n"
  fi
  p="$R/proc/driver/tenstorrent/$n/pids"
  emit_file "pids.$n" "$p"
  if [ -f "$p" ]; then
    while read -r pid rest; do
      case $pid in ''|*[!0-9]*) continue ;; esac
      emit_file "comm.$pid" "$R/proc/$pid/comm"
    done < "$p"
  fi
done

if [ -n "$heartbeat" ]; then
  # A sleep without fractions (strict POSIX) still waits at least as long.
  sleep "$delay" 2>/dev/null || sleep $(( ${delay%%.*} + 1 ))
  for n in $ids; do
    emit_file "sys.$n.tt_heartbeat.2" "$R/sys/class/tenstorrent/tenstorrent!$n/tt_heartbeat"
  done
fi

if [ -r "$R/proc/mounts" ]; then
  printf '%s mounts.hugetlbfs ok\n' "$M"
  awk '$3 == "hugetlbfs" { print $2, $4 }' "$R/proc/mounts"
else
  printf '%s mounts.hugetlbfs missing\n' "$M"
fi
emit_file hugepages.nr "$R/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"
emit_file hugepages.free "$R/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages"

i=0
for p in "$@"; do
  if [ -e "$R$p" ]; then s=present; else s=absent; fi
  printf '%s probe.%s %s\n' "$M" "$i" "$s"
  i=$((i + 1))
done

if [ -z "$ttsmi" ]; then
  printf '%s tt-smi skipped\n' "$M"
elif ! command -v "$ttsmi" >/dev/null 2>&1; then
  printf '%s tt-smi absent\n' "$M"
else
  printf '%s tt-smi.err ok\n' "$M"
  out=$(bounded "$ttsmi_timeout" "$ttsmi" -s --snapshot_no_tty 2>&3 </dev/null)
  rc=$?
  printf '%s tt-smi rc=%s\n%s\n' "$M" "$rc" "$out"
fi

if [ -n "$docker_host" ]; then set -- -H "$docker_host"; else set --; fi
printf '%s docker.err ok\n' "$M"
out=$(bounded "$docker_timeout" docker "$@" info --format '{{.ServerVersion}}|{{.DockerRootDir}}' 2>&3 </dev/null)
rc=$?
printf '%s docker rc=%s\n%s\n' "$M" "$rc" "$out"
root_dir=${out#*|}
if [ "$rc" = 0 ] && [ -n "$root_dir" ] && [ "$root_dir" != "$out" ]; then
  printf '%s df.err ok\n' "$M"
  out=$(df -Pk "$root_dir" 2>&3)
  rc=$?
  printf '%s df rc=%s\n%s\n' "$M" "$rc" "$out"
fi

printf '%s end\n' "$M"
"""

MAX_OUTPUT = 8 * 1024 * 1024  # a tt-smi snapshot of a Galaxy is well under 1 MiB
GATHER_SLACK = 60.0  # seconds on top of the script's own sleeps and bounded commands


def gather_argv(
    *,
    root: str,
    nonce: str,
    device_ids: Sequence[int],
    probe_paths: Sequence[str],
    heartbeat_delay: float,
    tt_smi: str | None,
    tt_smi_timeout: int,
    docker_endpoint: str | None,
    docker_timeout: int,
) -> list[str]:
    """The argv that runs the gather on a host; every value is its own argument."""
    if not root.startswith("/"):
        raise ValueError(f"root must be an absolute path, got {root!r}")
    for path in probe_paths:
        if not path.startswith("/"):
            raise ValueError(f"probe paths must be absolute, got {path!r}")
    for device in device_ids:
        if isinstance(device, bool) or not isinstance(device, int) or device < 0:
            raise ValueError(f"device numbers are whole numbers >= 0, got {device!r}")
    return [
        "sh", "-c", GATHER_SCRIPT, "gather",
        root, nonce, f"{heartbeat_delay:g}", tt_smi or "", str(tt_smi_timeout),
        docker_endpoint or "", str(docker_timeout),
        *(str(device) for device in device_ids), "--", *probe_paths,
    ]


@functools.lru_cache(maxsize=None)
def default_probe_paths() -> tuple[str, ...]:
    """Every mount source of the profile catalog: what the runner asks ``facts.has_path`` about."""
    return tuple(sorted({mount.source for profile in default_profiles().values() for mount in profile.mounts}))


def preflight(
    transport: Transport,
    host: Host,
    *,
    boards: Mapping[str, Board] | None = None,
    config: PreflightConfig | None = None,
    root: str = "/",
    tt_smi: str | None = "tt-smi",
    probe_paths: Sequence[str] = (),
    heartbeat_delay: float | None = None,
) -> PreflightReport:
    """Gather the facts of ``host`` over ``transport`` and judge them against its declared boards.

    Never raises for the host's state: an unreachable host is a report with one ``connect``
    fault (category ``ssh`` or ``network``), a gather that did not finish one ``gather`` fault.
    ``root`` other than ``/`` is a stand-in host tree (see the module doc). ``tt_smi`` is the
    command to run for the snapshot (``None``: skip it). ``probe_paths`` are asked about on
    top of :func:`default_probe_paths`, for ``report.facts.has_path``.
    """
    boards = default_boards() if boards is None else boards
    config = default_preflight_config() if config is None else config
    if heartbeat_delay is not None:
        config = replace(config, heartbeat_delay=heartbeat_delay)
    device_ids = tuple(dict.fromkeys(host.device_ids))
    probes = tuple(dict.fromkeys((*default_probe_paths(), *probe_paths)))
    nonce = secrets.token_hex(8)
    argv = gather_argv(
        root=root,
        nonce=nonce,
        device_ids=device_ids,
        probe_paths=probes,
        heartbeat_delay=config.heartbeat_delay,
        tt_smi=tt_smi if host.boards else None,
        tt_smi_timeout=config.tt_smi_timeout,
        docker_endpoint=host.docker,
        docker_timeout=config.docker_timeout,
    )
    timeout = math.ceil(config.heartbeat_delay) + config.tt_smi_timeout + config.docker_timeout + GATHER_SLACK
    collected = _Collector()
    try:
        result = transport.run(argv, timeout=timeout, on_stdout=collected.add)
    except TransportError as exc:
        return PreflightReport(host.name, (fault("connect", exc.category, exc.message),))
    if result.timed_out:
        return PreflightReport(
            host.name,
            (fault("gather", EnvCategory.TIMEOUT, f"the preflight gather did not finish in {timeout:g} s"),),
        )
    try:
        if collected.overflow:
            raise GatherError(f"the gather printed more than {MAX_OUTPUT} bytes")
        facts = parse_gather(
            collected.text(),
            nonce,
            root=root,
            device_ids=device_ids,
            probe_paths=probes,
            heartbeat_delay=config.heartbeat_delay,
        )
    except GatherError as exc:
        status = "killed by a signal" if result.exit_status is None else f"exit {result.exit_status}"
        stderr = result.stderr_tail.strip().splitlines()
        detail = f"; stderr: {stderr[-1]}" if stderr else ""
        # The transport raises for a connection it saw break; output cut short without that
        # still means the session to the host did not carry the script through.
        return PreflightReport(
            host.name,
            (fault("gather", EnvCategory.SSH, f"the host did not run the preflight script to its end ({status}): {exc}{detail}"),),
        )
    return PreflightReport(host.name, evaluate(facts, host.boards, boards, config), facts)


class _Collector:
    """Keeps stdout lines up to :data:`MAX_OUTPUT` bytes, so a runaway host cannot fill memory."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.size = 0
        self.overflow = False

    def add(self, line: str) -> None:
        self.size += len(line) + 1
        if self.size > MAX_OUTPUT:
            self.overflow = True
        else:
            self.lines.append(line)

    def text(self) -> str:
        return "\n".join(self.lines)
