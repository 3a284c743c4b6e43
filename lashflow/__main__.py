"""``python -m lashflow`` is the ``lashflow`` command."""

from .cli import main

main()
