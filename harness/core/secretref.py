"""Secret references: specs and inventories name secrets as ``${ENV_VAR}``, never hold them.

The value is read from the environment only where it is used (a registry login, a check's
0600 env file), so it never lands in a spec, an argv, a log or the JUnit feed.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")


def secret_name(value: str | None) -> str | None:
    """The variable a ``${NAME}`` reference names; ``None`` when ``value`` is not one."""
    match = _REF.fullmatch(value or "")
    return match.group(1) if match else None


def is_secret_ref(value: str | None) -> bool:
    return secret_name(value) is not None


REDACTED = "***"


class Masker:
    """The one place secret values are masked: every writer (JUnit, summary.json, the console,
    the check logs) passes its text through the run's masker before it writes."""

    def __init__(self, values: Iterable[str] = ()):
        self.values = tuple(v for v in dict.fromkeys(str(value) for value in values) if v)  # "" would match everywhere

    @classmethod
    def for_checks(cls, envs: Iterable[Mapping[str, str]], environ: Mapping[str, str]) -> "Masker":
        """The values of every ``${VAR}`` the mappings reference (the checks' env and secret
        files), as set in ``environ``."""
        names = {name for env in envs for value in env.values() if (name := secret_name(value))}
        return cls(environ[name] for name in names if name in environ)

    def text(self, text: str) -> str:
        if not self.values:
            return text
        # Mask the union of every occurrence of every secret, overlapping ones too: replacing
        # them one by one would leave the tail of a secret that overlaps another.
        spans = []
        for secret in self.values:
            start = text.find(secret)
            while start != -1:
                spans.append((start, start + len(secret)))
                start = text.find(secret, start + 1)
        if not spans:
            return text
        spans.sort()
        pieces, done = [], 0
        for start, end in spans:
            if end <= done:
                continue
            if start > done:
                pieces.append(text[done:start])
            if start >= done:
                pieces.append(REDACTED)
            done = end
        pieces.append(text[done:])
        return "".join(pieces)

    def data(self, value: Any) -> Any:
        """``value`` (JSON-like: dicts, lists, strings) with every string masked."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.data(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        return value
