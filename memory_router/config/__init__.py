"""The files the router reads, parsed once into immutable objects.

``router_config`` (router-config.json: ``schema`` validates, ``defaults`` fills in, ``cache`` keeps
the compiled result), ``installed`` (backends.json), ``paths`` (where every file lives, the one home
of path resolution), ``statedir`` (trust checks on it), ``envvars`` (the variables that can change an
answer), ``json5`` (OpenClaw's openclaw.json), ``installation`` (how this copy was installed) and
``readiness`` (which configured backends can answer here).
"""
