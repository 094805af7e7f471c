"""What a ``docker run``'s ending says before the test's own output is read.

Docker and the in-container probe fail in ways that must never read as a failing kernel:

- the probe's exit (:data:`~harness.core.invocation.PROBE_EXIT`) with ``MISSING`` lines: the
  container does not see the card, sysfs, the 1G hugepages or ``/dev/shm`` → ``env_fault/mount``;
- exit 125 (the daemon could not create or start the container), or 126/127 before the probe
  ran (Docker could not exec the entrypoint) → ``env_fault/docker``, or ``image`` when the
  image is missing, with Docker's own message;
- 126/127 *after* the probe ran: the test command is not in the image → ``error/spec``;
- killed by the timeout → ``env_fault/timeout`` (a device-hang signature in the log, found by
  the classifier, is more specific and wins).

- the lease wrapper gave up waiting for a card another run holds → ``env_fault/device-busy``.

Anything else means the test ran: its XML and log decide (``None`` here).
"""

from __future__ import annotations

from typing import Sequence

from harness.core import lease
from harness.core.invocation import PROBE_EXIT, PROBE_PREFIX, missing_from_probe
from harness.core.outcomes import EnvCategory, Evidence, HarnessErrorKind, Verdict

DOCKER_CANNOT_RUN = 125
CANNOT_EXECUTE = 126
NOT_FOUND = 127
_IMAGE_MISSING = ("Unable to find image", "No such image", "pull access denied", "manifest unknown")


NumberedLines = Sequence[tuple[int, str]]


def judge_exit(exit_status: int | None, timed_out: bool, stderr: NumberedLines, timeout: float) -> Verdict | None:
    """``stderr``: (line number, text) of the container's stderr — at least the probe's lines
    and the last lines; the whole stream is not needed (an IR dump can be gigabytes)."""
    probe_ran = any(text.startswith(PROBE_PREFIX) for _, text in stderr)
    if exit_status == lease.BUSY_EXIT and not lease.lease_held([text for _, text in stderr]):
        waited = [Evidence(n, text, "harness-lease") for n, text in stderr if text.startswith(lease.WAITING)]
        return Verdict.env_fault(
            EnvCategory.DEVICE_BUSY,
            "the card is leased by another run (another harness, or another check of this one) "
            "and was not free within the lease wait; nothing was started",
            waited,
        )
    if timed_out:
        return Verdict.env_fault(
            EnvCategory.TIMEOUT,
            f"killed after its timeout of {timeout:g} s; the container was stopped and removed",
            _last_lines(stderr, 3),
        )
    if exit_status == PROBE_EXIT and probe_ran:
        missing = missing_from_probe([text for _, text in stderr])
        if missing:
            what = ", ".join(f"{item.path} ({item.kind})" for item in missing)
            return Verdict.env_fault(
                EnvCategory.MOUNT,
                f"the container does not see {what}: check the device profile's --device and -v options "
                "and the host's mounts; the test was not started",
                [Evidence(n, text, "harness-probe") for n, text in stderr if text.startswith(f"{PROBE_PREFIX} MISSING")],
            )
    if exit_status == DOCKER_CANNOT_RUN or (exit_status in (CANNOT_EXECUTE, NOT_FOUND) and not probe_ran):
        message = _docker_message(stderr)
        category = EnvCategory.IMAGE if any(s in message for s in _IMAGE_MISSING) else EnvCategory.DOCKER
        return Verdict.env_fault(
            category, f"docker run failed (exit {exit_status}): {message}", _last_lines(stderr, 3)
        )
    if exit_status in (CANNOT_EXECUTE, NOT_FOUND):
        return Verdict.error(
            HarnessErrorKind.SPEC,
            f"the test command could not be executed in the image (exit {exit_status}): "
            f"{_docker_message(stderr)}; check the check's binary/command against the image",
            _last_lines(stderr, 2),
        )
    return None


_DOCKER_TRAILERS = ("See 'docker run --help'", "Run 'docker run --help'")  # docker CLI 28 / 20.10


def _docker_message(lines: NumberedLines) -> str:
    """Docker's own error line: the daemon's answer if there is one, else the last words."""
    meaningful = [
        text.strip()
        for _, text in lines
        if text.strip() and not text.startswith(PROBE_PREFIX) and not text.startswith(_DOCKER_TRAILERS)
    ]
    for text in reversed(meaningful):
        if text.startswith("docker:") or "Error response from daemon" in text:
            return text
    return meaningful[-1] if meaningful else "no message"


def _last_lines(lines: NumberedLines, count: int) -> list[Evidence]:
    meaningful = [
        (n, text) for n, text in lines
        if text.strip() and not text.startswith(PROBE_PREFIX) and not text.startswith(_DOCKER_TRAILERS)
    ]
    return [Evidence(n, text) for n, text in meaningful[-count:]]
