"""A minimal memory service speaking dialogbench's REST contract (docs/memory-adapters.md),
with the standard library only: run it, then measure it with `--memory http://HOST:PORT`.

    python examples/memory_service.py --port 8765
    dialogbench run retrieval --dataset locomo --memory http://127.0.0.1:8765 --out runs/mine

The memory inside is deliberately simple (replace it with yours): per subject, the messages
ingested so far; a recall ranks them by how many of the query's words they share and answers
message-id memories. `reset` and `dump` are here; `indexed` is not (it is optional: a 404
tells dialogbench not to wait). A fuller reference, with text memories, faults and slow
indexing, is `dialogbench.testing.memoryserver`.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

WORD = re.compile(r"\w+")
STORE: dict[str, dict[str, dict[str, Any]]] = {}  # subject -> message id -> message
LOCK = threading.Lock()


def words(text: str) -> set[str]:
    return {w.lower() for w in WORD.findall(text)}


def ingest(body: dict[str, Any]) -> dict[str, Any]:
    with LOCK:
        held = STORE.setdefault(body["subject"], {})
        for m in body["messages"]:
            held.setdefault(m["id"], m)  # a retried ingest stores nothing twice
    return {}


def recall(body: dict[str, Any]) -> dict[str, Any]:
    asked = words(body["query"]["text"])
    k = body.get("budget", {}).get("k") or 10
    with LOCK:
        held = list(STORE.get(body["subject"], {}).values())
    scored = [(len(asked & words(m["text"])), -m["position"], m["id"]) for m in held]
    best = sorted((s for s in scored if s[0] > 0), reverse=True)[:k]
    return {"memories": [{"message_id": i, "score": float(n)} for n, _, i in best]}


def reset(body: dict[str, Any]) -> dict[str, Any]:
    with LOCK:
        STORE.pop(body["subject"], None)
    return {}


def dump(subject: str) -> dict[str, Any]:
    with LOCK:
        return {"memories": [{"message_id": i} for i in STORE.get(subject, {})]}


class Handler(BaseHTTPRequestHandler):
    """POST /ingest, /recall, /reset; GET /dump?subject=S; anything else 404."""

    def do_POST(self) -> None:
        routes = {"/ingest": ingest, "/recall": recall, "/reset": reset}
        route = routes.get(self.path.rstrip("/"))
        if route is None:
            return self.answer(404, {"error": f"no endpoint {self.path}"})
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            self.answer(200, route(body))
        except (ValueError, KeyError, TypeError) as e:  # outside the contract: 400, named
            self.answer(400, {"error": f"bad request: {type(e).__name__}: {e}"})

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        subject = urllib.parse.parse_qs(url.query).get("subject", [""])[0]
        if url.path.rstrip("/") != "/dump" or not subject:
            return self.answer(404, {"error": f"no endpoint {url.path}"})
        self.answer(200, dump(subject))

    def answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(f"memory service on http://{args.host}:{server.server_port}")
    server.serve_forever()


if __name__ == "__main__":
    main()
