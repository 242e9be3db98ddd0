"""The wiring of the pipeline: one query from its text to its envelope.

``router`` runs query -> rules -> plan -> attempts -> envelope: it holds the validated config and
the backend instances, asks :mod:`memory_router.core` for every decision (the rule, the plan, the
sans-IO fallback machine), has ``drivers`` make the machine's calls (awaited in the daemon,
blocking in the one-shot CLI) and writes the machine's events to ``routerlog`` (router.log).
Everything here that touches the world (a backend call, a thread, an event loop, a file) is what
:mod:`memory_router.core` leaves out.
"""
