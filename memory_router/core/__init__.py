"""The pipeline, one module per stage: ``query`` -> ``rules`` -> ``plan`` -> ``attempts`` (driving the
sans-IO ``fallback`` machine, with ``cooldown``, ``calibration`` and ``fuse``) -> ``envelope``.

``router`` wires the stages; ``errors``, ``routerlog``, ``timefmt`` and ``frozen`` are the vocabulary
they share. Nothing here parses a config file, opens a socket or knows a backend's transport.
"""
