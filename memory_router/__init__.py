"""memory-router: rule-based dispatch and fallback for the OpenClaw memory stack.

The folders follow the pipeline and its surroundings::

    core/     the pipeline's decisions, pure (no I/O): query -> rules -> plan -> attempts (the
              sans-IO fallback machine) -> envelope
    routing/  the wiring: the router, the drivers that make the machine's calls, router.log
    config/   the files it reads: router-config.json, backends.json, where each file lives
    output/   writing an answer to standard output
    cli/      the memory-router command (cli/entry.py is the console script)
    client/   the thin client that answers a query from a warm daemon, and the wire it shares
    daemon/   the warm router behind serve, serve --socket and mcp

Backends sit behind the seam in ``memory_router.backends.base`` (``memory_router/backends/``,
one package per backend type). Nothing in ``core`` knows a subprocess, SQLite or HTTP.

Immutable values (results, envelopes, rules, plan steps, the parsed config, the adapters'
records) have one idiom, written down once with the reason (cold start) in
``memory_router/core/frozen.py``: a ``Frozen`` subclass declared by its annotations.
"""

__version__ = "0.1.0"
