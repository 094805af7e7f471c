"""The shipped catalogs are checked once per version and kept: a cached catalog is the very
catalog a full check gives, and a bad or missing cache is never trusted nor an error."""

from __future__ import annotations

import shutil

import pytest

from harness.core import signatures, summaries
from harness.core.catalogcache import cached
from harness.core.configs import config_path
from harness.core.signatures import anchors, load_catalog


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "tt-harness"


def load(path):
    return cached(path, signatures._CODE, load_catalog, signatures._dump, signatures._restore)


def test_a_cached_catalog_is_the_checked_one_with_the_same_anchors(tmp_path, cache):
    path = tmp_path / "signatures.yaml"
    shutil.copy(config_path("signatures.yaml"), path)
    checked = load(path)  # checks it in full, keeps it
    assert len(list(cache.iterdir())) == 1
    signatures._ANCHORS.clear()
    again = load(path)  # from the cache: no check, anchors remembered
    assert again == checked
    assert {key for key in signatures._ANCHORS} == {(s.pattern.pattern, 0, longest) for s in checked for longest in (False, True)}
    assert all(anchors(a.pattern) == anchors(b.pattern) for a, b in zip(again, checked))
    assert all(a.pattern.search(a.example) for a in again)  # compiled on first use


def test_a_changed_catalog_is_checked_again_and_a_corrupt_cache_is_rebuilt(tmp_path, cache):
    path = tmp_path / "signatures.yaml"
    shutil.copy(config_path("signatures.yaml"), path)
    load(path)
    (entry,) = cache.iterdir()
    entry.write_text('{"signatures": [{"id": 1}]')  # truncated: not what we wrote
    assert len(load(path)) == len(load_catalog(path))
    path.write_text(path.read_text().replace("No chips detected in the cluster'", "No chips detected in the clusterX'", 1))
    with pytest.raises(Exception, match="does not match its own example"):
        load(path)  # a new version is checked, never taken from the old one's cache


def test_an_unwritable_cache_only_costs_time(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    path = config_path("signatures.yaml")
    assert load(path) == load_catalog(path)


def test_the_default_summaries_round_trip(cache):
    summaries.default_summaries.cache_clear()
    try:
        first = summaries.default_summaries()
        summaries.default_summaries.cache_clear()
        assert summaries.default_summaries() == first and any(p.name.startswith("summaries-") for p in cache.iterdir())
    finally:
        summaries.default_summaries.cache_clear()
