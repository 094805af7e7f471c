"""The location aliases of one module, and op indices encoded small enough for a million ops.

A location is *encoded* to one int as soon as it is read:

- ``>= 0``: the op index it stands for;
- ``NO_INDEX`` (-1): no index, the op is not checked;
- ``<= -2``: "whatever alias slot ``s`` stands for", with ``s = -2 - value``.

Aliases may be defined after the ops that use them (MLIR prints most location aliases after
the module), so references stay encoded until :meth:`AliasTable.resolve`, once the whole
module has been read. Slots of the names MLIR's printer gives (``#loc``, ``#loc1``, ...) live
in an int64 array (slot ``2k``); other names, and fused locations waiting for aliases, in a
list (slot ``2j+1``). That keeps the table at about 8 bytes per alias.
"""

from __future__ import annotations

import re
from array import array

from harness.mlir.locations import (
    AliasRef,
    CallSiteLoc,
    FusedLoc,
    FusedPolicy,
    Location,
    NameLoc,
    name_index,
)

NO_INDEX = -1
UNDEFINED = -(1 << 63)  # a numbered slot not defined (yet)
_NUMBERED = re.compile(r"#loc(0|[1-9]\d{0,8})?")
_NUMBERED_CAP = 1 << 22  # a sparse `#loc999999999` must not allocate a huge array


class UnresolvedAlias(Exception):
    """An op's location needs an alias that is never defined, or that refers to itself."""


def numbered_key(name: str) -> int | None:
    """``#loc`` -> 0, ``#loc0`` -> 1, ``#loc7`` -> 8; None for any other name."""
    match = _NUMBERED.fullmatch(name)
    if match is None:
        return None
    digits = match.group(1)
    return 0 if digits is None else int(digits) + 1


class AliasTable:
    def __init__(self, fused: FusedPolicy = FusedPolicy.MIN):
        self.fused = FusedPolicy(fused)
        self.numbered = array("q")  # read directly by the reader's fast path
        self._other: list[int | tuple[int, ...]] = []
        self._other_names: list[str | None] = []  # None: an anonymous fused location
        self._other_slots: dict[str, int] = {}

    # -- encoding --------------------------------------------------------------------------
    def reserve(self, key: int) -> bool:
        """Make ``numbered[key]`` exist; False when ``key`` is beyond what the array may hold
        (that name then lives in the list of other names)."""
        if key >= _NUMBERED_CAP:
            return False
        if key >= len(self.numbered):
            grow = max(key + 1, 2 * len(self.numbered)) - len(self.numbered)
            self.numbered.extend(array("q", [UNDEFINED]) * grow)
        return True

    def ref(self, name: str) -> int:
        """The encoded reference to alias ``name`` (``#loc12``)."""
        key = numbered_key(name)
        if key is not None and self.reserve(key):
            return -2 - 2 * key
        slot = self._other_slots.get(name)
        if slot is None:
            slot = self._new_other(UNDEFINED, name)
            self._other_slots[name] = slot
        return -3 - 2 * slot

    def define(self, name: str, value: int) -> bool:
        """Record ``name = value``; False when ``name`` was already defined."""
        slot = -2 - self.ref(name)
        if self._get(slot) != UNDEFINED:
            return False
        self._set(slot, value)
        return True

    def encode(self, loc: Location) -> int:
        if isinstance(loc, NameLoc):
            index = name_index(loc.name)
            if index is not None:
                return index if index >= 0 else NO_INDEX
            return self.encode(loc.child) if loc.child is not None else NO_INDEX
        if isinstance(loc, CallSiteLoc):
            return self.encode(loc.callee)
        if isinstance(loc, FusedLoc):
            if self.fused is FusedPolicy.SKIP:
                return NO_INDEX
            parts = tuple(self.encode(part) for part in loc.locations)
            if all(part >= NO_INDEX for part in parts):
                return self._combine(parts)
            return -3 - 2 * self._new_other(parts, None)
        if isinstance(loc, AliasRef):
            return self.ref(loc.name)
        return NO_INDEX  # file:line:col, unknown, dialect locations carry no index

    # -- resolution ------------------------------------------------------------------------
    def resolve(self, value: int) -> int:
        """The index (or NO_INDEX) an encoded value stands for; raises UnresolvedAlias."""
        if value >= NO_INDEX:
            return value
        slot = -2 - value
        found = self._get(slot)
        if type(found) is int and found >= NO_INDEX:
            return found
        return self._resolve_slot(slot)

    def _resolve_slot(self, start: int) -> int:
        # Iterative depth-first walk (alias chains can be long); every slot on the way is
        # overwritten with its final value, so each alias is resolved once.
        stack = [start]
        on_path = {start}
        while stack:
            slot = stack[-1]
            found = self._get(slot)
            waiting = None
            if found == UNDEFINED:
                name = self._name(slot)
                if "." not in name:
                    raise UnresolvedAlias(f"location alias {name} is never defined")
                final = NO_INDEX  # `#dialect.attr` without a body: a dialect location
            elif isinstance(found, tuple):
                values = []
                for part in found:
                    part_value = self._final(part)
                    if part_value is None:
                        waiting = -2 - part
                        break
                    values.append(part_value)
                final = self._combine(values)
            elif found >= NO_INDEX:
                final = found
            else:
                final = self._final(found)
                if final is None:
                    waiting = -2 - found
            if waiting is None:
                self._set(slot, final)  # type: ignore[arg-type]
                stack.pop()
                on_path.discard(slot)
            elif waiting in on_path:
                loop = stack[stack.index(waiting) :] + [waiting]
                shown = loop if len(loop) <= 12 else [*loop[:6], None, *loop[-5:]]  # a 200,000-alias loop, in a line
                cycle = " -> ".join(f"... ({len(loop) - 11} more)" if s is None else self._name(s) for s in shown)
                raise UnresolvedAlias(f"location aliases refer to each other in a cycle: {cycle}")
            else:
                stack.append(waiting)
                on_path.add(waiting)
        return self._get(start)  # type: ignore[return-value]

    def _final(self, value: int) -> int | None:
        """``value`` if it needs no more resolving, else None."""
        if value >= NO_INDEX:
            return value
        found = self._get(-2 - value)
        return found if type(found) is int and found >= NO_INDEX else None

    def _combine(self, parts) -> int:
        indices = [part for part in parts if part >= 0]
        if not indices:
            return NO_INDEX
        return min(indices) if self.fused is FusedPolicy.MIN else max(indices)

    # -- slots -----------------------------------------------------------------------------
    def _new_other(self, value: int | tuple[int, ...], name: str | None) -> int:
        self._other.append(value)
        self._other_names.append(name)
        return len(self._other) - 1

    def _get(self, slot: int) -> int | tuple[int, ...]:
        return self._other[slot >> 1] if slot & 1 else self.numbered[slot >> 1]

    def _set(self, slot: int, value: int) -> None:
        if slot & 1:
            self._other[slot >> 1] = value
        else:
            self.numbered[slot >> 1] = value

    def _name(self, slot: int) -> str:
        if slot & 1:
            return self._other_names[slot >> 1] or "a fused location"
        key = slot >> 1
        return "#loc" if key == 0 else f"#loc{key - 1}"
