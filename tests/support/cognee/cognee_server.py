"""Bring up a REAL Cognee API server on loopback for the tests (and by hand).

What it does, in order (stdlib only; Cognee itself runs in its own venv, ``.tools/cognee-venv``,
installed by ``.ci/setup.d/40-cognee.sh``):

1. starts the FAKE embeddings endpoint (``fake_embeddings.py``: hashed bag-of-words vectors, a
   stand-in because no embedding model can be downloaded here) and a "black hole" LLM endpoint
   that accepts connections and never answers (so a full LLM completion really stalls);
2. seeds an offline HuggingFace cache with a tiny word-level ``tokenizer.json`` for the model id
   ``local/fake-tok``: Cognee loads the embedding model's tokenizer at start-up and would
   otherwise try to download one;
3. starts Cognee's own API app (``serve.py`` runs ``cognee.api.client:app`` under uvicorn) on
   127.0.0.1 and a free port, access control ON (the default), loading the test graph with
   Cognee's own ``add_data_points`` (``load_graph.py``) during start-up, before it accepts
   connections;
4. waits for ``GET /health``, logs in as the default user and creates an API key.

By hand (one command; prints the base URL and API key, Ctrl-C stops everything)::

    python3 tests/support/cognee/cognee_server.py
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]  # tests/support/cognee -> the repository
sys.path.insert(0, str(REPO))  # run by hand (`python3 tests/support/cognee/cognee_server.py`) or from bench/

from tests.support.cognee import fake_embeddings  # noqa: E402

DIM = 64
DATASET = "arch"
CHUNK_DATASET = "runbooks"
USER = "default_user@example.com"
TOKENIZER_MODEL = "local/fake-tok"
# A minimal word-level tokenizer in the `tokenizers` library's JSON format: Cognee only counts
# tokens with it (chunk sizing), so every word mapping to [UNK] is fine.
TOKENIZER_JSON: dict[str, object] = {
    "version": "1.0",
    "truncation": None,
    "padding": None,
    "added_tokens": [],
    "normalizer": {"type": "Lowercase"},
    "pre_tokenizer": {"type": "Whitespace"},
    "post_processor": None,
    "decoder": None,
    "model": {"type": "WordLevel", "vocab": {"[UNK]": 0}, "unk_token": "[UNK]"},
}


def cognee_python() -> Path | None:
    """The Cognee venv's interpreter: ``$COGNEE_PYTHON``, else ``<repo>/.tools/cognee-venv``."""
    if env := os.environ.get("COGNEE_PYTHON"):
        return Path(env)
    candidate = REPO / ".tools" / "cognee-venv" / "bin" / "python"
    return candidate if candidate.exists() else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class BlackHole:
    """A TCP server that accepts connections, reads, and never answers: a stalled LLM."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, name="black-hole", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)  # keep it open, say nothing

    def close(self) -> None:
        for c in [self.sock, *self.conns]:
            try:
                c.close()
            except OSError:
                pass


def seed_tokenizer(hf_home: Path) -> None:
    repo_dir = hf_home / "hub" / ("models--" + TOKENIZER_MODEL.replace("/", "--"))
    revision = "0" * 40
    snapshot = repo_dir / "snapshots" / revision
    snapshot.mkdir(parents=True, exist_ok=True)
    (snapshot / "tokenizer.json").write_text(json.dumps(TOKENIZER_JSON))
    (snapshot / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 8192}))
    (repo_dir / "refs").mkdir(exist_ok=True)
    (repo_dir / "refs" / "main").write_text(revision)


def http_json(
    method: str,
    url: str,
    *,
    body: object = None,
    form: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 10.0,
) -> tuple[int, object]:
    data = None
    hdrs = dict(headers or {})
    if form is not None:
        data = urllib.parse.urlencode(form).encode()
        hdrs["Content-Type"] = "application/x-www-form-urlencoded"
    elif body is not None:
        data = json.dumps(body).encode()
        hdrs["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            return exc.code, json.loads(raw)
        except ValueError:
            return exc.code, raw.decode(errors="replace")


@dataclass
class CogneeServer:
    base_url: str
    api_key: str
    password: str
    dataset: str
    root: Path
    proc: subprocess.Popen[bytes]
    log_path: Path
    timings: dict[str, float] = field(default_factory=dict)
    _closers: list[Callable[[], None]] = field(default_factory=list)

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no server log)"

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                # uvicorn waits for in-flight requests on SIGTERM, and a stalled LLM completion
                # would keep it for minutes; the test data is disposable, so a short grace.
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=3)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        for close in self._closers:
            close()


class ServerStartError(RuntimeError):
    pass


def start(
    python: Path,
    root: Path | None = None,
    *,
    startup_timeout: float = 150.0,
    access_control: bool = True,
    allow_cypher: bool = True,
) -> CogneeServer:
    """Start everything; raise :class:`ServerStartError` with the server's log on failure.

    ``access_control=False`` runs Cognee's single-user mode: no authentication, and search
    answers come as a bare list instead of per-dataset objects (no API key is made).
    ``allow_cypher=False`` leaves Cognee's default: CYPHER searches are refused."""
    t0 = time.perf_counter()
    root = Path(root or tempfile.mkdtemp(prefix="cognee-test-"))
    root.mkdir(parents=True, exist_ok=True)
    emb = fake_embeddings.serve(dim=DIM)
    hole = BlackHole()
    closers = [emb.shutdown, emb.server_close, hole.close]
    hf_home = root / "hf"
    seed_tokenizer(hf_home)
    port = free_port()
    password = secrets.token_urlsafe(12)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root / "home"),
        "LANG": "C.UTF-8",
        "SYSTEM_ROOT_DIRECTORY": str(root / "system"),
        "DATA_ROOT_DIRECTORY": str(root / "data"),
        "COGNEE_LOGS_DIR": str(root / "logs"),
        "HF_HOME": str(hf_home),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TELEMETRY_DISABLED": "1",
        # litellm would fetch its model cost map from the internet at import: use the bundled one
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_OFFLINE_MODE": "true",
        "ENV": "test",
        "EMBEDDING_PROVIDER": "openai_compatible",
        "EMBEDDING_MODEL": TOKENIZER_MODEL,
        "EMBEDDING_ENDPOINT": f"http://127.0.0.1:{emb.server_address[1]}/v1",
        "EMBEDDING_API_KEY": "fake-embeddings-key",
        "EMBEDDING_DIMENSIONS": str(DIM),
        # The LLM: an OpenAI-style endpoint that never answers. Only full completions use it.
        "LLM_PROVIDER": "openai",
        "LLM_MODEL": "openai/fake-llm",
        "LLM_ENDPOINT": f"http://127.0.0.1:{hole.port}/v1",
        "LLM_API_KEY": "fake-llm-key",
        "COGNEE_SKIP_CONNECTION_TEST": "true",
        "CACHING": "false",
        "ALLOW_CYPHER_QUERY": "true" if allow_cypher else "false",
        "ENABLE_BACKEND_ACCESS_CONTROL": "true" if access_control else "false",
        "DEFAULT_USER_PASSWORD": password,
        "FASTAPI_USERS_JWT_SECRET": secrets.token_urlsafe(24),
        "HTTP_API_HOST": "127.0.0.1",
        "HTTP_API_PORT": str(port),
        "PYTHONUNBUFFERED": "1",
    }
    (root / "home").mkdir(exist_ok=True)
    log_path = root / "server.log"
    timings: dict[str, float] = {}

    t = time.perf_counter()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(python), str(HERE / "serve.py"), DATASET, CHUNK_DATASET],
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    server = CogneeServer(f"http://127.0.0.1:{port}", "", password, DATASET, root, proc, log_path, timings, closers)
    deadline = time.monotonic() + startup_timeout
    while True:
        if proc.poll() is not None:
            server.stop()
            raise ServerStartError(f"serve.py (cognee.api.client) exited {proc.returncode}:\n{server.log_tail()}")
        try:
            status, _ = http_json("GET", server.base_url + "/health", timeout=2)
            if status == 200:
                break
        except OSError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise ServerStartError(f"no healthy answer within {startup_timeout:.0f} s:\n{server.log_tail()}")
        time.sleep(0.25)
    timings["server_start_s"] = time.perf_counter() - t

    if not access_control:
        timings["total_s"] = time.perf_counter() - t0
        return server
    status, token = http_json(
        "POST", server.base_url + "/api/v1/auth/login", form={"username": USER, "password": password}
    )
    if status != 200 or not isinstance(token, dict):
        server.stop()
        raise ServerStartError(f"login failed: HTTP {status} {token}\n{server.log_tail()}")
    status, key = http_json(
        "POST",
        server.base_url + "/api/v1/auth/api-keys",
        body={"name": "router-tests"},
        headers={"Authorization": f"Bearer {token['access_token']}"},
    )
    if status != 200 or not isinstance(key, dict) or "key" not in key:
        server.stop()
        raise ServerStartError(f"api key creation failed: HTTP {status} {key}\n{server.log_tail()}")
    server.api_key = key["key"]
    timings["total_s"] = time.perf_counter() - t0
    return server


if __name__ == "__main__":
    py = cognee_python()
    if py is None:
        sys.exit("no Cognee venv: run `bash .ci/setup.d/40-cognee.sh` (or set COGNEE_PYTHON)")
    srv = start(py)
    print(
        json.dumps(
            {
                "COGNEE_BASE_URL": srv.base_url,
                "COGNEE_API_KEY": srv.api_key,
                "username": USER,
                "password": srv.password,
                "dataset": srv.dataset,
                "root": str(srv.root),
                "timings": srv.timings,
            },
            indent=2,
        ),
        flush=True,
    )
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        srv.stop()
        shutil.rmtree(srv.root, ignore_errors=True)
