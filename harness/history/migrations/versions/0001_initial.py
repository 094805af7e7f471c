"""The first history schema: runs and their cases.

Revision ID: 0001
Revises:
Create Date: 2026-11-24
"""
from alembic import op
import sqlalchemy as sa

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(128), primary_key=True),
        sa.Column("suite", sa.String(255), nullable=False),
        sa.Column("started", sa.String(40), nullable=False),
        sa.Column("finished", sa.String(40), nullable=False, server_default=""),
        sa.Column("exit_code", sa.Integer, nullable=True),
        sa.Column("image_digest", sa.String(255), nullable=False, server_default=""),
        sa.Column("ref", sa.String(255), nullable=False, server_default=""),
    )
    op.create_index("ix_runs_started", "runs", ["started", "run_id"])
    op.create_index("ix_runs_suite_started", "runs", ["suite", "started", "run_id"])
    op.create_table(
        "cases",
        sa.Column("run_id", sa.String(128), primary_key=True),
        sa.Column("job", sa.String(255), primary_key=True),
        sa.Column("check_name", sa.String(255), primary_key=True),
        sa.Column("case_name", sa.String(1024), primary_key=True),
        sa.Column("host", sa.String(255), primary_key=True),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("category", sa.String(64), nullable=True),
        sa.Column("board", sa.String(255), nullable=False, server_default=""),
        sa.Column("device", sa.String(255), nullable=False, server_default=""),
        sa.Column("image_digest", sa.String(255), nullable=False, server_default=""),
        sa.Column("ref", sa.String(255), nullable=False, server_default=""),
        sa.Column("duration", sa.Float, nullable=False, server_default="0"),
        sa.Column("attempt", sa.Integer, nullable=False, server_default="1"),
        sa.Column("message", sa.Text, nullable=False, server_default=""),
        sa.Column("evidence", sa.Text, nullable=False, server_default="[]"),
        sa.Column("log", sa.Text, nullable=False, server_default=""),
    )
    op.create_index("ix_cases_check_run", "cases", ["check_name", "run_id"])
    op.create_index("ix_cases_host_run", "cases", ["host", "run_id"])


def downgrade() -> None:
    op.drop_table("cases")
    op.drop_table("runs")
