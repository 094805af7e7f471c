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
from harness.execution.transport.ssh import HOST_KEY_POLICIES, SshPool, SshTarget, SshTransport

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
