"""Run commands and move files on a lab host: over SSH, or on this machine.

See :mod:`.base` for the interface every transport offers.
"""

from harness.execution.transport.base import (
    ArtifactError,
    ByteSource,
    CommandResult,
    LineCallback,
    Lifeline,
    Transport,
    TransportError,
    remote_command_line,
)
from harness.execution.transport.local import LocalTransport

_SSH = ("HOST_KEY_POLICIES", "SshPool", "SshTarget", "SshTransport")


def __getattr__(name: str):
    # The SSH transport loads paramiko (~0.3 s): only code that uses it pays, not a Slurm job's
    # node entry point running the check on its own host.
    if name in _SSH:
        from harness.execution.transport import ssh

        return getattr(ssh, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "ArtifactError",
    "ByteSource",
    "CommandResult",
    "HOST_KEY_POLICIES",
    "LineCallback",
    "Lifeline",
    "LocalTransport",
    "SshPool",
    "SshTarget",
    "SshTransport",
    "Transport",
    "TransportError",
    "remote_command_line",
]
