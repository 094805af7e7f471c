"""Secret references: specs and inventories name secrets as ``${ENV_VAR}``, never hold them.

The value is read from the environment only where it is used (a registry login, a check's
0600 env file), so it never lands in a spec, an argv, a log or the JUnit feed.
"""

from __future__ import annotations

import re

_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")


def secret_name(value: str | None) -> str | None:
    """The variable a ``${NAME}`` reference names; ``None`` when ``value`` is not one."""
    match = _REF.match(value or "")
    return match.group(1) if match else None


def is_secret_ref(value: str | None) -> bool:
    return secret_name(value) is not None
