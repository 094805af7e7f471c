"""Read an HTML page (the report, or the DOM Chromium dumps) into plain elements the report tests
assert on: the standard library's HTML tokenizer, so what it finds is what a browser parses."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"})


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    text: str = ""  # all text inside, children's included
    parents: tuple[str, ...] = ()
    children: list["Element"] = field(default_factory=list)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self.stack: list[Element] = []

    def handle_starttag(self, tag, attrs):
        element = Element(tag, {k: v or "" for k, v in attrs}, parents=tuple(e.tag for e in self.stack))
        if self.stack:
            self.stack[-1].children.append(element)
        self.elements.append(element)
        if tag not in _VOID:
            self.stack.append(element)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in _VOID and self.stack and self.stack[-1].tag == tag:
            self.stack.pop()

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        for element in self.stack:
            element.text += data


def parse(page: str) -> list[Element]:
    collector = _Collector()
    collector.feed(page)
    collector.close()
    return collector.elements


def find(elements: list[Element], tag: str, cls: str | None = None) -> list[Element]:
    return [e for e in elements if e.tag == tag and (cls is None or cls in e.classes)]


def matrix_cells(elements: list[Element]) -> dict[tuple[str, str], Element]:
    """(host, check) -> the matrix's <td>."""
    return {(e.attrs["data-host"], e.attrs["data-check"]): e for e in find(elements, "td", "cell") if "data-host" in e.attrs}
