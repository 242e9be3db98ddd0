"""The environment variables that can change an answer: the router's and each adapter's.

One place for them: each adapter module exposes its set as ``ENV_VARS`` (imported from here), the
socket daemon publishes the names its configured backends depend on, and the thin client compares
its own values of those names with the daemon's (as salted hashes, never the values) before
trusting a daemon's answer. This module is imported by the client on every query, so it holds
only constants. ``tests/unit/test_env_vars.py`` scans ``backends/`` for every environment read and
fails on a name missing here.

A command backend's program inherits the whole environment; only the names below (and a
backend's own ``env`` in router-config.json, which is part of the config file) are compared, so a
program that depends on other variables should get them through ``env``.
"""

# Read by the router itself: path resolution (memory_router.config.paths, client) and `~` expansion.
ROUTER = frozenset({"MEMORY_ROUTER_STATE_DIR", "OPENCLAW_STATE_DIR", "MEMORY_ROUTER_CONFIG", "HOME"})

# The root's own variable, then OpenClaw's workspace resolution (memory_router.config.paths.openclaw_workspace).
TOTALRECALL = frozenset(
    {
        "OPENCLAW_REPO_ROOT",
        "OPENCLAW_STATE_DIR",
        "OPENCLAW_CONFIG_PATH",
        "OPENCLAW_WORKSPACE_DIR",
        "OPENCLAW_PROFILE",
        "HOME",
    }
)

# The adapter's own reads (memory_router/backends/qmd/), and what the qmd program it runs reads that
# changes results (index, config, models, devices); qmd inherits the router's environment.
QMD = frozenset(
    {
        "INDEX_PATH",
        "QMD_CONFIG_DIR",
        "XDG_CACHE_HOME",
        "XDG_CONFIG_HOME",
        "HOME",
        "PATH",
        "CI",
        "NO_COLOR",
        "MEMORY_ROUTER_QMD",
        "MEMORY_ROUTER_NODE",
        "QMD_EMBED_MODEL",
        "QMD_GENERATE_MODEL",
        "QMD_RERANK_MODEL",
        "QMD_FORCE_CPU",
        "QMD_LLAMA_GPU",
        "QMD_SQLITE_BUSY_TIMEOUT",
        "QMD_EMBED_CONTEXT_SIZE",
        "QMD_EXPAND_CONTEXT_SIZE",
        "QMD_RERANK_CONTEXT_SIZE",
        "QMD_EMBED_PARALLELISM",
        "CUDA_PATH",
        "LD_LIBRARY_PATH",
    }
)

# Plus any $NAME written in a configured db_path (lossless.config_env_vars).
LOSSLESS = frozenset({"LCM_DATABASE_PATH", "OPENCLAW_STATE_DIR", "HOME"})

COGNEE = frozenset({"COGNEE_BASE_URL", "COGNEE_API_KEY", "COGNEE_USERNAME", "COGNEE_PASSWORD"})

COMMAND = frozenset({"PATH"})

BY_ADAPTER: dict[str, frozenset[str]] = {
    "totalrecall": TOTALRECALL,
    "qmd": QMD,
    "lossless": LOSSLESS,
    "cognee": COGNEE,
    "command": COMMAND,
}

# What the client always compares (a daemon adds the names its configuration depends on).
ALL: frozenset[str] = ROUTER.union(*BY_ADAPTER.values())
