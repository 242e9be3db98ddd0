"""Writing a qmd index: a folder (re)indexed as a collection and embedded, under the index-writer
lock (``<index>.lock``, the lock the daemon's refresh takes too: :func:`.refresh.index_lock_path`),
with an embedding environment MiniLM survives. Used by the demo, ``openclaw install`` and the
benches; the daemon keeps an index fresh with :mod:`.refresh`.
"""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from memory_router.backends.qmd.locate import TOOLS, missing_models
from memory_router.backends.qmd.refresh import Command, Refresher
from memory_router.backends.qmd.settings import RefreshSettings
from memory_router.backends.qmd.transports import CliTransport, stderr_tail
from memory_router.contract import say

# The small embedding model .ci/setup.d/30-qmd-models.sh builds into a checkout's .tools/models/.
LOCAL_MINILM = "all-MiniLM-L6-v2-f16.gguf"
# qmd cuts a chunk to ~508 tokens of its own count, but source code re-tokenises past MiniLM's 512
# positions and llama.cpp aborts (GGML_ASSERT(i01 < ne01), issue 29); a 384-token context keeps
# every chunk inside them. Measured: a corpus of Python files embeds without aborting at 384.
MINILM_CONTEXT_SIZE = "384"


def embedding_env(env: Mapping[str, str], model: str | None = None) -> dict[str, str]:
    """The environment for ``qmd embed`` (and an index's first embedding run): ``model`` as
    ``QMD_EMBED_MODEL`` when given, a context size MiniLM survives on code and long notes, and one
    embedding context per core up to two (one 2-thread context embeds ~1 chunk/s on two cores,
    two contexts ~4.5). A value the caller's environment sets wins."""
    out = dict(env)
    if model is not None:
        out["QMD_EMBED_MODEL"] = model
    embed_model = out.get("QMD_EMBED_MODEL", "")
    if "minilm" in embed_model.lower():
        out.setdefault("QMD_EMBED_CONTEXT_SIZE", MINILM_CONTEXT_SIZE)
    out.setdefault("QMD_EMBED_PARALLELISM", str(max(1, min(2, os.cpu_count() or 1))))
    return out


def local_embedding_model(environ: Mapping[str, str]) -> str | None:
    """The embedding model a demo or a first index can use without a download: the caller's
    ``QMD_EMBED_MODEL``, else the MiniLM GGUF a checkout's setup built; None when neither."""
    chosen = environ.get("QMD_EMBED_MODEL")
    if chosen:
        return chosen
    built = TOOLS / "models" / LOCAL_MINILM if TOOLS else None
    return str(built) if built is not None and built.is_file() else None


def embed_collection(transport: CliTransport, model: str, lock_path: Path, *, timeout_s: float = 600.0) -> None:
    """``qmd embed`` over the index with ``model`` (recorded in the index's config by qmd, so later
    searches use it), under the index-writer lock. Raises RuntimeError or TimeoutExpired."""
    env = embedding_env(transport.env, model)
    env.pop("CI", None)  # qmd refuses model work under CI; this model is a local file, nothing is fetched
    with index_lock(lock_path):
        done = subprocess.run(
            transport.argv("embed", []),
            cwd=transport.cwd,
            env=env,
            capture_output=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            check=False,
        )
    if done.returncode != 0:
        stderr = done.stderr.decode("utf-8", "replace")
        raise RuntimeError(f"qmd embed exited with code {done.returncode}: {stderr_tail(stderr)}")


@contextmanager
def index_lock(path: Path) -> Iterator[None]:
    """An exclusive lock held by whoever writes a qmd index (concurrent `qmd update` crashes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_collection(
    transport: CliTransport, source: Path, name: str, mask: str, lock_path: Path, *, timeout_s: float = 120.0
) -> None:
    """(Re)index ``source`` as collection ``name`` under the index-writer lock.

    Raises RuntimeError (qmd failed) or subprocess.TimeoutExpired."""

    def call(subcommand: str, options: list[str], arg: str | None = None) -> subprocess.CompletedProcess[bytes]:
        argv = transport.argv(subcommand, options, arg)
        return subprocess.run(
            argv,
            cwd=transport.cwd,
            env=transport.env,
            capture_output=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            check=False,
        )

    transport.cwd.mkdir(parents=True, exist_ok=True)
    with index_lock(lock_path):
        listed = call("collection", ["list"])
        if re.search(rf"^{re.escape(name)} \(qmd://", listed.stdout.decode("utf-8", "replace"), re.MULTILINE):
            done = call("update", [])
        else:
            done = call("collection", ["add", "--name", name, "--mask", mask], str(source))
        if done.returncode != 0:
            raise RuntimeError(
                f"qmd exited with code {done.returncode}: {stderr_tail(done.stderr.decode('utf-8', 'replace'))}"
            )


def refresher_for(
    name: str,
    settings: RefreshSettings,
    cli: CliTransport,
    index_file: Path,
    config: Path,
    collections: tuple[str, ...],
    report: Callable[[str, str], None] | None,
) -> Refresher:
    """The daemon's refresh of one backend's index (:mod:`.refresh`): ``qmd update``, then ``qmd
    embed`` while the embedding model is on disk, run with the CLI transport's qmd and
    environment; what it reports goes to ``report`` (the daemon's: stderr and router.log; the
    backend context's :attr:`~memory_router.backends.base.BackendContext.report`), else stderr."""

    def embed() -> Command | None:
        if missing_models("embed", config, cli.env):
            return None  # no embedding model on disk: qmd embed would start a download
        env = embedding_env(cli.env)
        env.pop("CI", None)  # qmd refuses model work under CI; the model is a local file
        return Command(tuple(cli.argv("embed", [])), env, cli.cwd)

    def on_stderr(kind: str, message: str) -> None:
        say(message, who="memory-router serve")

    return Refresher(
        name,
        settings,
        index_file=index_file,
        config_file=config,
        collections=collections,
        update=Command(tuple(cli.argv("update", [])), dict(cli.env), cli.cwd),
        embed=embed,
        report=report or on_stderr,
    )
