"""A FAKE OpenAI-compatible embeddings endpoint, for running a real Cognee server in tests.

Cognee cannot search without an embedding model, and no model can be downloaded on the machines
this project is built and tested on. So this stand-in answers ``POST /v1/embeddings`` in the
documented OpenAI wire format with a deterministic *hashed bag-of-words* vector: each word
(lower-cased, identifiers also split into their camelCase/snake_case parts) adds +-1 to one of
``dim`` buckets chosen by a BLAKE2 hash, and the sum is L2-normalised. Texts that share words get
a high cosine similarity; that is all the tests need. It is not a language model and says so.

Stdlib only, so it runs under any Python. Standalone: ``python fake_embeddings.py --port 8765``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import math
import re
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_DIM = 64
_WORD = re.compile(r"[A-Za-z0-9]+")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def tokens(text: str) -> list[str]:
    out: list[str] = []
    for word in _WORD.findall(text):
        out.append(word.lower())
        parts = _CAMEL.findall(word)
        if len(parts) > 1:
            out.extend(p.lower() for p in parts)
    return out


def embed(text: str, dim: int = DEFAULT_DIM) -> list[float]:
    vec = [0.0] * dim
    for tok in tokens(text):
        digest = hashlib.blake2b(tok.encode(), digest_size=8).digest()
        bucket = int.from_bytes(digest[:4], "little") % dim
        vec[bucket] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0:  # no words at all: a fixed unit vector, so cosine distance stays defined
        vec[0], norm = 1.0, 1.0
    return [v / norm for v in vec]


class _Handler(BaseHTTPRequestHandler):
    server_version = "fake-embeddings/1"
    dim = DEFAULT_DIM

    def log_message(self, format: str, *args: object) -> None:  # quiet: tests read stdout
        pass

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": "fake-hashed-bow", "object": "model"}]})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:  # noqa: N802
        if not self.path.rstrip("/").endswith("/embeddings"):
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._send(400, {"error": {"message": "body is not JSON"}})
            return
        inputs = body.get("input", [])
        if isinstance(inputs, str):
            inputs = [inputs]
        dim = int(body.get("dimensions") or self.dim)
        data = []
        used = 0
        for index, text in enumerate(inputs):
            if not isinstance(text, str):  # token arrays: embed their string form
                text = " ".join(map(str, text))
            used += len(tokens(text))
            vector = embed(text, dim)
            embedding: list[float] | str = vector
            if body.get("encoding_format") == "base64":  # what the openai client asks for by default
                embedding = base64.b64encode(struct.pack(f"<{dim}f", *vector)).decode()
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        self._send(
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model", "fake-hashed-bow"),
                "usage": {"prompt_tokens": used, "total_tokens": used},
            },
        )


def serve(host: str = "127.0.0.1", port: int = 0, dim: int = DEFAULT_DIM) -> ThreadingHTTPServer:
    """Start the server in a daemon thread; ``server.server_address[1]`` is the port."""
    handler = type("Handler", (_Handler,), {"dim": dim})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="fake-embeddings", daemon=True).start()
    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--dim", type=int, default=DEFAULT_DIM)
    args = parser.parse_args()
    srv = serve(args.host, args.port, args.dim)
    print(f"fake embeddings on http://{args.host}:{srv.server_address[1]}/v1 (dim {args.dim})", flush=True)
    threading.Event().wait()
