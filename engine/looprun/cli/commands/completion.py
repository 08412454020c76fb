"""``looprun completion bash|zsh|fish``: the shell's completion script, from click.

The script asks ``looprun`` itself what completes a word (click's shell completion, with
``_LOOPRUN_COMPLETE`` set), so subcommands, options and choices stay in step with the
command line without a second list to maintain.
"""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

PROG = "looprun"
COMPLETE_VAR = "_LOOPRUN_COMPLETE"
SHELLS = ("bash", "zsh", "fish")


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
def command(shell: str) -> None:
    """Print the shell completion script for bash, zsh or fish.

    \b
    eval "$(looprun completion bash)"   # in ~/.bashrc
    eval "$(looprun completion zsh)"    # in ~/.zshrc
    looprun completion fish | source    # in ~/.config/fish/config.fish
    """
    root = click.get_current_context().find_root().command  # the whole command line
    completion = get_completion_class(shell)
    assert completion is not None, shell  # click ships all three
    click.echo(completion(root, {}, PROG, COMPLETE_VAR).source())
