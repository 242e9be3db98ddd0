"""``python -m memory_router`` is the ``memory-router`` command."""

from .entry import main

main()
