"""Agent CLIs as actors: each CLI's command line and output parser, and the actor that
runs one headless per act turn (working tree as cwd, stdin closed, its own home under the
run directory, its process group killed at the timeout)."""
