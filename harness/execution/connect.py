"""From an inventory host to a transport that reaches it."""

from __future__ import annotations

from harness.core.inventory import Host, Inventory
from harness.execution.transport import LocalTransport, SshPool, SshTarget, Transport


def ssh_target(host: Host, inventory: Inventory, via: tuple[str, ...] = ()) -> SshTarget:
    """The SSH target of an inventory host, its jump hosts resolved (a loop is refused)."""
    if host.name in via:
        raise ValueError(f"jump hosts form a loop: {' -> '.join((*via, host.name))}")
    if host.address is None:
        raise ValueError(f"host {host.name!r} is used as a jump host but has no SSH address")
    jump = ssh_target(inventory.host(host.jump), inventory, (*via, host.name)) if host.jump else None
    return SshTarget(
        name=host.name,
        address=host.address,
        port=host.port,
        user=host.user,
        identity_file=host.identity_file,
        known_hosts=host.known_hosts,
        host_key_policy=host.host_key_policy,
        jump=jump,
    )


class Connections:
    """One transport per host for the length of a command; ``close`` ends them all."""

    def __init__(self, inventory: Inventory):
        self.inventory = inventory
        self._pool = SshPool()

    def check(self, hosts: tuple[Host, ...]) -> None:
        """Raise ValueError for a host that cannot be reached as configured (e.g. a jump loop)."""
        for host in hosts:
            if host.transport == "ssh":
                ssh_target(host, self.inventory)

    def transport(self, host: Host) -> Transport:
        if host.transport == "local":
            return LocalTransport(host.name)
        return self._pool.get(ssh_target(host, self.inventory))

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> "Connections":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
