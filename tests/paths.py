"""Where the tests find the files they read: all inside this repository, nothing beside it.

The third-party files are verbatim copies; each folder's SOURCES.md says where they come from.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"

# The Jenkins xunit-plugin JUnit schema every report the harness writes is validated against.
JUNIT_XSD = DATA / "schemas" / "junit-10.xsd"
# tt-mlir lit tests (tt-mlir @ 19c86fca), read as real tt-mlir modules.
TTMLIR_INPUTS = DATA / "mlir" / "tt-mlir"
