"""memory-router: rule-based dispatch and fallback for the OpenClaw memory stack.

The folders follow the pipeline and its surroundings::

    core/     query -> rules -> plan -> attempts (driving the sans-IO fallback machine) -> envelope,
              wired by core/router.py
    config/   the files it reads: router-config.json, backends.json, where each file lives
    output/   writing an answer to standard output
    cli/      the memory-router command (cli/entry.py is the console script)
    client/   the thin client that answers a query from a warm daemon, and the wire it shares
    daemon/   the warm router behind serve, serve --socket and mcp

Backends sit behind the seam in ``memory_router.backends.base`` (the repository's ``backends/``
folder, one package per backend type). Nothing in ``core`` knows a subprocess, SQLite or HTTP.

Value records on the query path (``Step``, ``RuleMatch``, ``Plan``, ``Attempt``...) are
``NamedTuple``s, not dataclasses: on Python 3.11 defining a dataclass costs ~0.5 ms at import
(it compiles five or six generated methods), and a cold CLI query defines every class it uses
(docs/benchmarks.md, *Cold start*). Dataclasses stay where their machinery earns it (``replace``, field
factories, pydantic-validated ``Settings``).
"""

__version__ = "0.1.0"
