"""Alembic's environment: always handed an open connection by ``History.open`` (inside the
transaction that holds the migration lock), never reading alembic.ini or a URL itself."""

from alembic import context

from harness.history.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
