"""``python -m looprun``: the same as the ``looprun`` command."""

from looprun.cli import main

main()
