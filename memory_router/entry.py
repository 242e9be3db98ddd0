"""The ``memory-router`` console script.

``memory-router query ...`` is what an agent runs for every memory lookup, so it first tries the
warm daemon through :mod:`memory_router.client`, which imports only the standard library (no
click, no pydantic, no router): when a daemon answers, that is all this process imports. Every
other command, and ``query`` when no daemon answers, runs the click application in
:mod:`memory_router.cli` exactly as before.
"""

from __future__ import annotations

import sys


def main() -> None:
    argv = sys.argv[1:]
    if argv and argv[0] == "query":
        from .client import fast_query

        code = fast_query(argv[1:])
        if code is not None:
            sys.exit(code)
    from .cli import main as click_main

    click_main()


if __name__ == "__main__":  # pragma: no cover
    main()
