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
"""

__version__ = "0.1.0"
