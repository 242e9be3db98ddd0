"""The pipeline's decisions, one module per stage: ``query`` -> ``rules`` -> ``plan`` -> ``attempts``
(the values the sans-IO ``fallback`` machine decides with, beside it; with ``cooldown``,
``calibration`` and ``fuse``) -> ``envelope``.

``errors``, ``timefmt`` and ``frozen`` are the vocabulary they share. Pure: nothing here reads a
file, opens a socket, starts a thread or an event loop, or knows a backend's transport; the
wiring that does (the router, the drivers, router.log) is :mod:`memory_router.routing`, and what
the core reads of a backend is the seam's values (:mod:`memory_router.backends.base`).
``tests/unit/test_import_graph.py`` holds it to that.
"""
