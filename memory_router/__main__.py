"""``python -m memory_router`` is the ``memory-router`` command."""

from .cli import main

main()
