"""The ``memory-router`` console script.

``memory-router query ...`` is what an agent runs for every memory lookup, so it first tries the
warm daemon through :mod:`memory_router.client`, which imports only the standard library (no
click, no pydantic, no router): when a daemon answers, that is all this process imports. Every
other command runs the click application in :mod:`memory_router.cli`; so does ``query`` when no
daemon answered or its arguments need click's parser, and then it routes in-process.
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
        from .cli import IN_PROCESS
        from .cli import main as click_main

        # The daemon was tried (or the arguments need click): the click command routes in-process.
        click_main(obj=IN_PROCESS)
    from .cli import main as click_main

    click_main()


if __name__ == "__main__":  # pragma: no cover
    main()
