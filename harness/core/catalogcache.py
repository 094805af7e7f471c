"""A cache of the shipped catalogs, as checked, so that every ``harness classify`` does not pay
for checking them again.

Loading the signature catalog means parsing ~200 regexes twice (to compile them and to find
their anchors) and matching each against its example: most of a small log's classification.
The result depends only on the catalog file and the code that checks it, so it is kept, keyed
by a hash of both, under ``$XDG_CACHE_HOME/tt-harness`` (``~/.cache/tt-harness``). A cache that
is missing, unreadable, corrupt or unwritable is rebuilt or skipped, never trusted blindly and
never an error: the catalog is then checked as if there were no cache. Only the catalogs the
harness reads by default are cached; ``harness validate`` always checks a file in full.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable, TypeVar

from harness.core.errors import InputError
from harness.core.files import read_bounded

T = TypeVar("T")
_MAX = 16 << 20  # a cache file bigger than this is not ours


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tt-harness"


def cached(path: Path, code: tuple[str, ...], load: Callable[[Path], T], dump: Callable[[T], Any], restore: Callable[[Any], T]) -> T:
    """``load(path)``, or what ``dump`` kept of it last time the file and the ``code`` files
    (the modules that check it) were the same, given back through ``restore``."""
    try:
        digest = hashlib.sha256()
        for part in (path, *code):
            data = read_bounded(part, _MAX)
            digest.update(len(data).to_bytes(8, "little") + data)
        entry = cache_dir() / f"{path.stem}-{digest.hexdigest()[:32]}.json"
    except (OSError, InputError):
        return load(path)  # the caller's load reports an unreadable catalog its own way
    try:
        return restore(json.loads(read_bounded(entry, _MAX)))
    except (OSError, InputError, ValueError, KeyError, TypeError, IndexError):
        pass  # no cache yet, or one that is not what we wrote: check the catalog afresh
    value = load(path)
    try:
        from harness.core.atomic import write_text

        entry.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_text(entry, json.dumps(dump(value)))
    except OSError:
        pass  # a read-only home: every run checks the catalog, as without a cache
    return value
