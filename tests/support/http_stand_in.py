"""A stand-in HTTP server on 127.0.0.1 for checks that read a REST API (Connect's), without the service."""
from __future__ import annotations

import http.server
import threading
from typing import Callable


def serve(answer: Callable[[str], tuple[int, str]]):
    """Answers each GET with `answer(path)` (status, body); returns (server, [(path, Authorization)])."""
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the stdlib's name)
            seen.append((self.path, self.headers.get("Authorization")))
            status, body = answer(self.path)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen
