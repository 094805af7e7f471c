"""The typer application every command module registers on."""

import typer

app = typer.Typer(
    name="harness",
    help="tt-harness: run Tenstorrent kernel and compiler checks in correctly mounted containers, "
    "and tell environment faults apart from real failures.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
