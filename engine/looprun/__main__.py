"""``python -m looprun``: the same as the ``looprun`` command."""

from looprun.cli.main import main

main()
