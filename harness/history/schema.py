"""The history's tables, as SQLAlchemy Core metadata: what the queries use.

The migrations (``migrations/versions``) create exactly this; a test compares the migrated
database with this metadata, so the two cannot drift apart silently.

Why these indexes: ``harness history`` asks for the newest N runs (``ix_runs_started``, or
``ix_runs_suite_started`` for one suite), then every case of those runs (the primary key of
``cases`` starts with ``run_id``); ``--check`` and ``--host`` first find the runs that ran the
check or touched the host (``ix_cases_check_run``, ``ix_cases_host_run``) without reading all
cases. Nothing scans the whole table for an answer about the last N runs.
"""

from __future__ import annotations

from sqlalchemy import Column, Float, Index, Integer, MetaData, String, Table, Text

metadata = MetaData()

runs = Table(
    "runs",
    metadata,
    Column("run_id", String(128), primary_key=True),
    Column("suite", String(255), nullable=False),
    Column("started", String(40), nullable=False),  # ISO 8601 UTC: sorts as text
    Column("finished", String(40), nullable=False, server_default=""),
    Column("exit_code", Integer, nullable=True),
    Column("image_digest", String(255), nullable=False, server_default=""),
    Column("ref", String(255), nullable=False, server_default=""),
    Index("ix_runs_started", "started", "run_id"),
    Index("ix_runs_suite_started", "suite", "started", "run_id"),
)

cases = Table(
    "cases",
    metadata,
    Column("run_id", String(128), primary_key=True),
    Column("job", String(255), primary_key=True),
    Column("check_name", String(255), primary_key=True),
    Column("case_name", String(1024), primary_key=True),
    Column("host", String(255), primary_key=True),
    Column("outcome", String(16), nullable=False),
    Column("category", String(64), nullable=True),
    Column("board", String(255), nullable=False, server_default=""),
    Column("device", String(255), nullable=False, server_default=""),
    Column("image_digest", String(255), nullable=False, server_default=""),
    Column("ref", String(255), nullable=False, server_default=""),
    Column("duration", Float, nullable=False, server_default="0"),
    Column("attempt", Integer, nullable=False, server_default="1"),
    Column("message", Text, nullable=False, server_default=""),
    Column("evidence", Text, nullable=False, server_default="[]"),  # JSON list of lines
    Column("log", Text, nullable=False, server_default=""),
    Index("ix_cases_check_run", "check_name", "run_id"),
    Index("ix_cases_host_run", "host", "run_id"),
)
