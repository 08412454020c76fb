"""One module per subcommand, each defining ``command``; ``cli/main.py`` loads a module
only when its subcommand runs (or its help is asked for)."""
