"""Errors in what a user gave us: always ``path:line:col: message``, never a traceback."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file, located at the offending node (1-based line/col)."""

    path: str
    line: int
    col: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.message}"


class InputError(Exception):
    """Raised with every problem found in one input; the CLI prints them and exits 2."""

    def __init__(self, problems: Iterable[Problem]):
        self.problems = tuple(problems)
        if not self.problems:
            raise ValueError("InputError needs at least one problem")
        super().__init__("\n".join(str(p) for p in self.problems))

    @classmethod
    def at(cls, path: str, line: int, col: int, message: str) -> "InputError":
        return cls([Problem(path, line, col, message)])
