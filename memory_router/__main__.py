"""``python -m memory_router`` is the ``memory-router`` command."""

from memory_router.cli.entry import main

main()
