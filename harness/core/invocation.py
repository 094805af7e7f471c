"""How a check becomes a ``docker run`` argv.

One function builds the argv that ``harness render`` prints and the runner executes, so what a
developer copies from ``render`` is exactly what the lab ran. The container first runs a small
probe (plain ``sh``) that checks what the container really sees — device nodes, the card's
sysfs, the 1G hugepage mount, ``/dev/shm`` — and exits with :data:`PROBE_EXIT` naming what is
missing, before the test command is exec'd. A mis-mounted container then reads as
``env_fault/mount``, never as a failing kernel.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Callable, Sequence

from harness.core.profiles import HUGEPAGES_1G, Profile
from harness.core.secretref import is_secret_ref
from harness.core.spec import CheckSpec, ImageSpec, JobSpec, check_profile

PROBE_EXIT = 97  # not used by docker (125-127), gtest (1), pytest (1-5) or signals (128+n)
PROBE_PREFIX = "harness-probe:"
WORKDIR = "/harness"  # per-check folder on the host, bound here: inputs in, artifacts out
OUT_DIR = f"{WORKDIR}/out"
INPUT_PLACEHOLDER = "{input}"
OUTPUT_PLACEHOLDER = "{output}"
GTEST_XML = "gtest.xml"
PYTEST_XML = "pytest.xml"
MLIR_OUTPUT = "out.mlir"
SECRETS_ENV_FILE = "secrets.env"
SECRET_FILES_DIR = "secrets"  # in the check's work folder; /run/secrets in the container

# The probe: arguments are KIND:PATH items up to "--", then the test argv. Printing one line per
# item makes the container log say exactly what it saw.
_PROBE_SCRIPT = r"""
missing=0
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  kind=${1%%:*}; path=${1#*:}; shift
  case "$kind" in
    device) [ -c "$path" ] && ok=1 || ok=0 ;;
    sysfs) [ -d "$path" ] && ok=1 || ok=0 ;;
    hugetlbfs) grep -q "^[^ ]* $path hugetlbfs " /proc/mounts && ok=1 || ok=0 ;;
    writable) [ -d "$path" ] && [ -w "$path" ] && ok=1 || ok=0 ;;
    *) ok=0 ;;
  esac
  if [ "$ok" = 1 ]; then echo "harness-probe: ok $kind $path" >&2
  else echo "harness-probe: MISSING $kind $path" >&2; missing=1; fi
done
shift
[ "$missing" = 0 ] || exit 97
exec "$@"
""".strip()


@dataclass(frozen=True)
class ProbeItem:
    kind: str  # device | sysfs | hugetlbfs | writable
    path: str

    def arg(self) -> str:
        return f"{self.kind}:{self.path}"


_PROBE_LINE = re.compile(r"^harness-probe: MISSING (\w+) (\S+)$")


def missing_from_probe(lines: Sequence[str]) -> list[ProbeItem]:
    """The items the probe reported missing, from the container's stderr lines."""
    found = []
    for line in lines:
        match = _PROBE_LINE.match(line.strip())
        if match:
            found.append(ProbeItem(match.group(1), match.group(2)))
    return found


def probe_items(device_ids: Sequence[int], iommu: bool = False) -> tuple[ProbeItem, ...]:
    """What a container on these devices must see. Hugepages are not needed with IOMMU on
    (tt-metal PR #26304: UMD then maps host memory without them)."""
    items = [ProbeItem("device", f"/dev/tenstorrent/{n}") for n in device_ids]
    items.append(ProbeItem("sysfs", "/sys/class/tenstorrent"))
    if not iommu:
        items.append(ProbeItem("hugetlbfs", HUGEPAGES_1G))
    items.append(ProbeItem("writable", "/dev/shm"))  # UMD's lock mutexes live in POSIX shm
    return tuple(items)


def needs_card(job: JobSpec, check: CheckSpec) -> bool:
    """Whether a check uses the job's card: a card job's checks do, except those run with a
    cardless profile (a compiler check beside the kernel checks)."""
    return job.device is not None and not check_profile(job, check).cardless


def container_command(check: CheckSpec, image: ImageSpec) -> list[str]:
    """The argv of the test itself, inside the container."""
    if check.kind == "gtest":
        argv = [check.binary]
        if check.filter:
            argv.append(f"--gtest_filter={check.filter}")
        argv.append(f"--gtest_output=xml:{OUT_DIR}/{GTEST_XML}")
        return argv + list(check.args)
    if check.kind == "pytest":
        return ["python3", "-m", "pytest", check.target, f"--junit-xml={OUT_DIR}/{PYTEST_XML}", *check.args]
    argv = [_fill(arg, check) for arg in check.command]
    if check.kind == "mlir-order":
        # Without debuginfo no loc(...) is printed at all; the after-all dump (on stderr) is
        # what names the pass that broke the order.
        for flag in ("--mlir-print-debuginfo", "--mlir-print-ir-after-all"):
            if flag not in argv:
                argv.append(flag)
    return argv


def _fill(arg: str, check: CheckSpec) -> str:
    if check.input is not None:
        arg = arg.replace(INPUT_PLACEHOLDER, f"{WORKDIR}/in/{check.input.name}")
    return arg.replace(OUTPUT_PLACEHOLDER, f"{OUT_DIR}/{MLIR_OUTPUT}")


def container_name(run_id: str, check: str, attempt: int) -> str:
    return f"harness-{run_id}-{check}-{attempt}"


def docker_run_argv(
    job: JobSpec,
    check: CheckSpec,
    image_ref: str,
    *,
    run_id: str,
    attempt: int,
    host_workdir: str,
    device_ids: Sequence[int] = (),
    iommu: bool = False,
    has_path: Callable[[str], bool] | None = None,
    profile: Profile | None = None,
    leased: Sequence[int] | None = None,
    name: str | None = None,
) -> list[str]:
    """The complete ``docker run`` argv for one attempt of one check. ``leased``: the cards
    the check holds (it gets only those), or ``None`` where no lease is known (``render``).
    ``name``: the container's name (default: from the run, check and attempt)."""
    profile = profile or check_profile(job, check)
    argv = [
        "docker", "run", "--rm",
        "--name", name or container_name(run_id, check.name, attempt),
        "--label", f"harness.run={run_id}",
        "--label", f"harness.job={job.name}",
        "--label", f"harness.check={check.name}",
    ]
    if leased is not None:
        argv += ["--label", f"harness.devices={','.join(str(n) for n in leased)}"]
    argv += ["-v", f"{host_workdir}:{WORKDIR}"]
    argv += profile.docker_run_options(job.image.home, has_path, leased)
    for key, value in check.env.items():
        if not is_secret_ref(value):
            argv += ["-e", f"{key}={value}"]
    if any(is_secret_ref(value) for value in check.env.values()):
        # Secret values never appear in an argv (ps, logs, render output): the runner writes
        # them to a 0600 file in the check's workdir and removes it when the check ends.
        argv += ["--env-file", f"{host_workdir}/{SECRETS_ENV_FILE}"]
    if check.secret_files:
        argv += ["-v", f"{host_workdir}/{SECRET_FILES_DIR}:/run/secrets:ro"]
    if job.image.home:
        argv += ["-w", job.image.home]
    argv += ["--entrypoint", "sh", image_ref, "-c", _PROBE_SCRIPT, "harness-probe"]
    if needs_card(job, check):
        argv += [item.arg() for item in probe_items(device_ids, iommu)]
    argv += ["--", *container_command(check, job.image)]
    return argv


def quoted(argv: Sequence[str]) -> str:
    return shlex.join(argv)
