"""memory-router: rule-based dispatch and fallback for the OpenClaw memory stack.

The pipeline, one module each::

    query.py     validate and normalise the query text
    rules.py     compiled rule table -> RuleMatch (first strong match, else weak, else default)
    plan.py      RuleMatch + backends.json -> Plan (the tier-filtered chain of steps)
    attempts.py  Plan -> Attempts (call each backend in turn under a timeout, accept or fall back)
    envelope.py  Attempts -> Envelope (the spec's router envelope)

``config.py`` (router-config.json), ``installed.py`` (backends.json), ``routerlog.py``
(router.log) and ``router.py`` (the facade that wires the pipeline) support it; backends sit
behind the seam in ``memory_router.backends.base``.

Value records on the query path (``Step``, ``RuleMatch``, ``Plan``, ``Attempt``...) are
``NamedTuple``s, not dataclasses: on Python 3.11 defining a dataclass costs ~0.5 ms at import
(it compiles five or six generated methods), and a cold CLI query defines every class it uses
(docs/benchmarks.md, *Cold start*). Dataclasses stay where their machinery earns it (``replace``, field
factories, pydantic-validated ``Settings``).
"""

__version__ = "0.1.0"
