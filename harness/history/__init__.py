"""The run history: every case outcome of every run, in SQLite or PostgreSQL (``store``).

Storage lives here (SQLAlchemy Core, Alembic migrations); what the history *means* (pass rates,
env-fault rates, flakiness attribution) is pure and lives in :mod:`harness.core.flakiness`.
"""
