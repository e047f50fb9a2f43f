"""The web console's JSON API over HTTP, as the page calls it (tests/console)."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any

import sluice


class ConsoleHttp:
    """Requests to an embedded broker's console, logged in as ``user`` if given."""

    def __init__(self, broker: sluice.EmbeddedBroker, user: str | None = None,
                 password: str = "") -> None:  # fmt: skip
        assert broker.broker is not None and broker.broker.console is not None
        self.base = f"http://127.0.0.1:{broker.broker.console.port}"
        self.headers: dict[str, str] = {}
        if user is not None:
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            self.headers["Authorization"] = f"Basic {token}"

    def request(
        self, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:  # fmt: skip
        """(status, decoded JSON answer or the text) of one request."""
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        all_headers = {**self.headers, **(headers or {})}
        if method in ("POST", "DELETE"):
            all_headers.setdefault("Content-Type", "application/json")
        request = urllib.request.Request(self.base + path, data, all_headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, text = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read()
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text.decode("utf-8", "replace")

    def get(self, path: str) -> Any:
        """The answer of a GET that must succeed."""
        status, body = self.request("GET", path)
        assert status == 200, (path, status, body)
        return body
