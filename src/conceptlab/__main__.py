"""`python -m conceptlab`: the command line."""

from conceptlab.cli import main

main()
