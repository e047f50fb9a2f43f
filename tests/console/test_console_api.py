"""The console's JSON API without sockets: requests handed to its router, the cluster
behind it a stand-in recording what it is asked (the live broker behind the real one
is tested in test_console_live.py). Routing, input checks, the CSRF and Host guards,
logins and sessions, and Kafka errors as HTTP statuses."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from sluice.client.errors import SaslAuthenticationException, exception_for
from sluice.config import BrokerConfig, ConfigError
from sluice.console import Console, ConsoleListener, ListenerInfo, console_listener
from sluice.console.sessions import Sessions
from sluice.protocol import ErrorCode
from sluice.server.http_server import HttpRequest, HttpResponse
from support.waiting import wait_until

PLAIN = ConsoleListener("PLAINTEXT", "PLAINTEXT", "127.0.0.1:9092")
SASL = ConsoleListener("SASL_PLAINTEXT", "SASL_PLAINTEXT", "127.0.0.1:9093",
                       ("SCRAM-SHA-256", "PLAIN"))  # fmt: skip


class FakeView:
    """Stands for a ClusterView: records calls, answers what the test sets."""

    instances: list[FakeView] = []

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.calls: list[tuple[Any, ...]] = []
        self.closed = False
        self.fail: Exception | None = None
        FakeView.instances.append(self)

    def close(self) -> None:
        self.closed = True

    def cluster(self) -> dict[str, Any]:
        if self.config.get("sasl.password") not in (None, "right"):
            raise SaslAuthenticationException("Invalid username or password")
        if (
            self.config.get("sasl.mechanism") == "SCRAM-SHA-256"
            and self.config.get("sasl.username") == "plain-only"
        ):
            raise SaslAuthenticationException("no SCRAM credential")
        return {"cluster_id": "c", "controller_id": 0, "brokers": []}

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> Any:
            self.calls.append((name, *args))
            if self.fail is not None:
                raise self.fail
            return {"ok": name}

        return call


@pytest.fixture
def console() -> Iterator[Console]:
    FakeView.instances = []
    made = _console(PLAIN)
    yield made
    asyncio.run(made.stop())


def _console(listener: ConsoleListener, **kwargs: Any) -> Console:
    async def make() -> Console:
        return Console(listener, broker_id=1, version="9.9", view_factory=FakeView, **kwargs)

    return asyncio.run(make())


def _call(console: Console, method: str, target: str, body: bytes | dict[str, Any] | None = None,
          headers: dict[str, str] | None = None) -> tuple[int, Any, HttpResponse]:  # fmt: skip
    path, _, query = target.partition("?")
    raw = json.dumps(body).encode() if isinstance(body, dict) else (body or b"")
    all_headers = {"host": "127.0.0.1:8080"}
    if method in ("POST", "DELETE"):
        all_headers["content-type"] = "application/json"
    all_headers.update(headers or {})
    from urllib.parse import parse_qs

    request = HttpRequest(method, path, parse_qs(query), all_headers, raw, ("127.0.0.1", 1))
    response = asyncio.run(console.router(request))
    payload = json.loads(response.body) if response.content_type == "application/json" else None
    return response.status, payload, response


def _view(console: Console) -> FakeView:
    return FakeView.instances[-1]


def test_reads_reach_the_view_with_their_parameters(console: Console) -> None:
    status, body, response = _call(console, "GET", "/api/session")
    assert status == 200
    assert body == {"login_required": False, "user": None, "listener": "PLAINTEXT",
                    "security_protocol": "PLAINTEXT", "broker_id": 1, "version": "9.9"}  # fmt: skip
    assert ("X-Content-Type-Options", "nosniff") in response.headers
    assert _call(console, "GET", "/api/cluster")[1]["version"] == "9.9"
    assert _call(console, "GET", "/api/topics?internal=true")[1] == {"topics": {"ok": "topics"}}
    _call(console, "GET", "/api/topics/a.b-c")
    _call(console, "GET", "/api/topics/t/partitions/3/records?limit=7")
    _call(console, "GET", "/api/groups/my%20group")
    assert _view(console).calls == [
        ("topics", True),
        ("topic", "a.b-c"),
        ("records", "t", 3, 7),
        ("group", "my group"),
    ]
    assert len(FakeView.instances) == 1  # one session without login, reused


def test_changes_reach_the_view(console: Console) -> None:
    new = {"name": "new", "partitions": 3, "configs": {"retention.ms": "5"}}
    status, _, _ = _call(console, "POST", "/api/topics", new)
    assert status == 201
    assert _call(console, "DELETE", "/api/topics/new")[:2] == (200, {"deleted": "new"})
    _call(console, "POST", "/api/topics/t/configs", {"set": {"a": "1"}, "delete": ["b"]})
    _call(console, "POST", "/api/groups/g/offsets", {"to": "offset", "offset": 5, "topic": "t"})
    _call(console, "POST", "/api/groups/g/offsets", {"to": "earliest"})
    assert _view(console).calls == [
        ("create_topic", "new", 3, -1, {"retention.ms": "5"}),
        ("delete_topic", "new"),
        ("alter_topic_configs", "t", {"a": "1"}, ["b"]),
        ("reset_group_offsets", "g", "offset", 5, "t"),
        ("reset_group_offsets", "g", "earliest", None, None),
    ]


@pytest.mark.parametrize(
    ("method", "target", "body", "status", "code"),
    [
        ("GET", "/api/nothing", None, 404, "NOT_FOUND"),
        ("GET", "/api/topics/t/extra", None, 404, "NOT_FOUND"),
        ("PUT", "/api/topics", None, 405, "METHOD_NOT_ALLOWED"),
        ("DELETE", "/api/topics", None, 405, "METHOD_NOT_ALLOWED"),
        ("POST", "/api/topics", b"{not json", 400, "BAD_REQUEST"),
        ("POST", "/api/topics", b"[1, 2]", 400, "BAD_REQUEST"),
        ("POST", "/api/topics", b"\xff\xfe", 400, "BAD_REQUEST"),
        ("POST", "/api/topics", b"", 400, "BAD_REQUEST"),
        ("POST", "/api/topics", {"partitions": 1}, 400, "BAD_REQUEST"),
        ("POST", "/api/topics", {"name": "t", "partitions": "3"}, 400, "BAD_REQUEST"),
        ("POST", "/api/topics", {"name": "t", "partitions": True}, 400, "BAD_REQUEST"),
        ("POST", "/api/topics", {"name": "t", "partitions": 0}, 400, "BAD_REQUEST"),
        ("POST", "/api/topics", {"name": "t", "configs": {"a": 1}}, 400, "BAD_REQUEST"),
        ("POST", "/api/topics/t/configs", {}, 400, "BAD_REQUEST"),
        ("POST", "/api/topics/t/configs", {"delete": "a"}, 400, "BAD_REQUEST"),
        ("GET", "/api/topics/t/partitions/x/records", None, 400, "BAD_REQUEST"),
        ("GET", "/api/topics/t/partitions/0/records?limit=100000", None, 400, "BAD_REQUEST"),
        ("GET", "/api/topics/t/partitions/0/records?limit=0", None, 400, "BAD_REQUEST"),
        ("POST", "/api/groups/g/offsets", {"to": "yesterday"}, 400, "BAD_REQUEST"),
        ("POST", "/api/groups/g/offsets", {"to": "offset"}, 400, "BAD_REQUEST"),
        ("POST", "/api/groups/g/offsets", {"to": "offset", "offset": -1}, 400, "BAD_REQUEST"),
    ],
)
def test_bad_requests_get_a_clear_json_error(
    console: Console, method: str, target: str, body: Any, status: int, code: str
) -> None:
    answer, payload, _ = _call(console, method, target, body)
    assert (answer, payload["code"]) == (status, code)
    assert payload["error"]
    calls = FakeView.instances[-1].calls if FakeView.instances else []
    assert calls == []  # nothing reached the cluster


def test_changes_need_json_and_the_same_origin(console: Console) -> None:
    form = {"content-type": "application/x-www-form-urlencoded"}
    assert _call(console, "POST", "/api/topics", {"name": "t"}, form)[0] == 415
    assert _call(console, "DELETE", "/api/topics/t", None, {"content-type": "text/plain"})[0] == 415
    evil = {"origin": "http://evil.example"}
    assert _call(console, "POST", "/api/topics", {"name": "t"}, evil)[1]["code"] == "CROSS_ORIGIN"
    cross = {"sec-fetch-site": "cross-site"}
    assert _call(console, "DELETE", "/api/topics/t", None, cross)[0] == 403
    same = {"origin": "http://127.0.0.1:8080", "sec-fetch-site": "same-origin"}
    assert _call(console, "POST", "/api/topics", {"name": "t"}, same)[0] == 201
    assert [c[0] for c in _view(console).calls] == ["create_topic"]


def test_a_loopback_console_refuses_other_host_names(console: Console) -> None:
    for host in ("localhost:8080", "127.0.0.1", "[::1]:8080"):
        assert _call(console, "GET", "/api/session", None, {"host": host})[0] == 200
    status, body, _ = _call(console, "GET", "/api/session", None, {"host": "rebind.example:8080"})
    assert (status, body["code"]) == (403, "FORBIDDEN_HOST")
    console.loopback_only = False  # bound to another address: any Host
    assert _call(console, "GET", "/api/session", None, {"host": "broker.example"})[0] == 200


def test_kafka_errors_map_to_http_statuses(console: Console) -> None:
    _call(console, "GET", "/api/session")
    view = _view(console)
    cases = [
        (ErrorCode.topic_authorization_failed, 403),
        (ErrorCode.cluster_authorization_failed, 403),
        (ErrorCode.unknown_topic_or_partition, 404),
        (ErrorCode.topic_already_exists, 409),
        (ErrorCode.non_empty_group, 409),
        (ErrorCode.invalid_replication_factor, 400),
        (ErrorCode.request_timed_out, 503),
        (ErrorCode.unknown_server_error, 500),
    ]
    for code, status in cases:
        view.fail = exception_for(code, f"failed: {code.name}")
        answer, body, _ = _call(console, "GET", "/api/topics/t")
        assert (answer, body["code"]) == (status, code.name.upper())
        assert body["error"] == f"failed: {code.name}"


def _basic(user: str, password: str) -> dict[str, str]:
    return {"authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_logins_on_a_sasl_listener() -> None:
    FakeView.instances = []
    console = _console(SASL, max_sessions=2)
    try:
        status, body, response = _call(console, "GET", "/api/session")
        assert (status, body["code"]) == (401, "LOGIN_REQUIRED")
        assert ("WWW-Authenticate", 'Basic realm="Sluice console", charset="UTF-8"') in (
            response.headers
        )
        assert _call(console, "GET", "/api/session", None, {"authorization": "Basic !!"})[0] == 401
        status, body, _ = _call(console, "GET", "/api/session", None, _basic("alice", "wrong"))
        assert (status, body["code"]) == (401, "LOGIN_FAILED")
        tried = list(FakeView.instances)  # each mechanism tried, then let go
        assert [v.config["sasl.mechanism"] for v in tried] == ["SCRAM-SHA-256", "PLAIN"]
        wait_until(lambda: all(v.closed for v in tried), 10, "the failed logins' views closed")

        status, body, _ = _call(console, "GET", "/api/session", None, _basic("alice", "right"))
        assert (status, body["user"]) == (200, "alice")
        alice = FakeView.instances[-1]
        assert alice.config["sasl.mechanism"] == "SCRAM-SHA-256"
        assert (alice.config["sasl.username"], alice.config["sasl.password"]) == ("alice", "right")
        made = len(FakeView.instances)
        _call(console, "GET", "/api/topics", None, _basic("alice", "right"))
        assert len(FakeView.instances) == made  # the session is reused
        assert alice.calls == [("topics", False)]

        # a user with PLAIN credentials only: the next mechanism
        _call(console, "GET", "/api/session", None, _basic("plain-only", "right"))
        assert FakeView.instances[-1].config["sasl.mechanism"] == "PLAIN"
        # a third login closes the least recently used session (max_sessions=2)
        _call(console, "GET", "/api/session", None, _basic("carol", "right"))
        assert len(console.sessions) == 2
        wait_until(lambda: alice.closed, 10, "the evicted session closed")
    finally:
        asyncio.run(console.stop())
    assert all(v.closed for v in FakeView.instances)


def test_sessions_expire_when_idle() -> None:
    now = [0.0]
    closed: list[str] = []
    sessions = Sessions(closed.append, lambda: now[0], max_sessions=3, idle_s=10)
    a, b = sessions.key("a", "pw"), sessions.key("b", "pw")
    assert a != b and sessions.key("a", "pw") == a and a != sessions.key("a", "other")
    sessions.add(a, "a", "view-a")
    now[0] = 6
    sessions.add(b, "b", "view-b")
    now[0] = 12
    assert sessions.get(a) is None and closed == ["view-a"]
    assert sessions.get(b) is not None  # used at 12: lives until 22
    now[0] = 21
    assert sessions.get(b) is not None
    sessions.close_all()
    assert closed == ["view-a", "view-b"] and len(sessions) == 0


def test_static_files_and_the_page(console: Console) -> None:
    status, _, page = _call(console, "GET", "/")
    assert status == 200 and page.content_type.startswith("text/html")
    assert b'<script type="module" src="/static/app.js">' in page.body
    status, _, script = _call(console, "GET", "/static/app.js")
    assert status == 200 and script.content_type.startswith("text/javascript")
    assert any(name == "Content-Security-Policy" for name, _ in script.headers)
    assert _call(console, "GET", "/static/../server.py")[2].status == 404
    assert _call(console, "GET", "/static/nothing.js")[2].status == 404


def _listener(name: str, protocol: str, **kwargs: Any) -> ListenerInfo:
    return ListenerInfo(name, protocol, "0.0.0.0", 9092, **kwargs)


def test_the_console_listener_choice() -> None:
    config = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0"})
    plain = _listener("PLAINTEXT", "PLAINTEXT")
    sasl = _listener("CLIENTS", "SASL_SSL", sasl_mechanisms=("OAUTHBEARER", "PLAIN",
                                                             "SCRAM-SHA-512"))  # fmt: skip
    mtls = _listener("SSL", "SSL", client_certificate_required=True)
    chosen = console_listener(config, [plain, sasl])
    assert (chosen.name, chosen.mechanisms) == ("CLIENTS", ("SCRAM-SHA-512", "PLAIN"))
    assert chosen.bootstrap == "127.0.0.1:9092" and chosen.login_required
    assert console_listener(config, [mtls, plain]).name == "PLAINTEXT"
    assert not console_listener(config, [plain]).login_required
    with pytest.raises(ConfigError, match="client certificates"):
        console_listener(config, [mtls])
    named = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "console.listener.name": "ssl"})
    with pytest.raises(ConfigError, match="requires client certificates"):
        console_listener(named, [plain, mtls])
    with pytest.raises(ConfigError, match="not one of the listeners"):
        console_listener(named, [plain])
    oauth = _listener("SASL_PLAINTEXT", "SASL_PLAINTEXT", sasl_mechanisms=("OAUTHBEARER",))
    with pytest.raises(ConfigError, match="none of which"):
        console_listener(config, [oauth])
