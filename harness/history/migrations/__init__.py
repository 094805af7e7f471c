"""Alembic migrations of the history database (run by ``History.open``, never by hand)."""
