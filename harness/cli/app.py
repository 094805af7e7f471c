"""The typer application every command module registers on, loading each command only when used.

``harness classify`` is called from scripts and hooks, so start-up counts: importing every
command module (and what they import) for each call cost several times what the command
itself does. The group below knows the commands by name from :data:`harness.cli.COMMANDS` and
imports a command's module only when that command runs, or when help lists them all.
"""

import importlib

import typer
from typer.core import TyperGroup


class LazyGroup(TyperGroup):
    """A typer group whose commands are imported on first use (see :data:`harness.cli.COMMANDS`)."""

    def list_commands(self, ctx) -> list:
        return list(dict.fromkeys([*_table(), *self.commands]))  # the table's order, then any others

    def get_command(self, ctx, cmd_name: str):
        if cmd_name not in self.commands and cmd_name in _table():
            importlib.import_module(_table()[cmd_name])  # registers its commands on `app`
            self.commands.update(typer.main.get_group(app).commands)
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx, args):
        if args and args[0] not in _table() and args[0] not in self.commands:
            for name in _table():  # an unknown name: load all, so "did you mean" sees every command
                self.get_command(ctx, name)
        return super().resolve_command(ctx, args)


def _table() -> dict:
    from harness.cli import COMMANDS  # the package imports this module: read the table late

    return COMMANDS


app = typer.Typer(
    name="harness",
    help="tt-harness: run Tenstorrent kernel and compiler checks in correctly mounted containers, "
    "and tell environment faults apart from real failures.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=LazyGroup,
)


@app.callback()
def _group() -> None:
    # Always a group, however few commands are loaded: typer turns an app with a single
    # registered command into that command, which would read `classify` as its FILE argument.
    pass
