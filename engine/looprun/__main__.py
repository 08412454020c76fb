from looprun.cli import main

main()
