"""``Console``: the web console's HTTP side — its page, its JSON API and their guards.

Served by :class:`~sluice.server.http_server.HttpServer` on the broker's event loop:
``/`` and ``/static/*`` are the one-page app (plain ES modules and CSS from
``sluice/console/static``, read once at start), ``/api/*`` the JSON API. Each API
request is checked in this order, every refusal a JSON ``{"error", "code"}`` with a 4xx
status:

- the ``Host`` header, when the console is bound to loopback, must name a loopback
  host (a DNS-rebinding page cannot reach it through another name);
- a change (POST, DELETE) must come with ``Content-Type: application/json`` and, when
  the browser says where it comes from (``Origin``, ``Sec-Fetch-Site``), from this
  origin: another site's page can neither send such a request without a CORS preflight
  nor pass the origin check;
- the login (:mod:`.sessions`): HTTP Basic credentials on a SASL listener;
- the body: a JSON object of the expected fields.

The work itself runs on the console's few threads, one request at a time per login, in
the login's :class:`~.cluster_view.ClusterView` — Kafka requests to this broker — so a
change is authorized as the same request from any Kafka client would be.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import ipaddress
import json
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final, TypeVar
from urllib.parse import unquote, urlsplit

from sluice.client.errors import AuthenticationException, KafkaException
from sluice.console.cluster_view import MAX_RECORDS, ClusterView
from sluice.console.metrics_sampler import MetricsRegistry, MetricsSampler
from sluice.console.sessions import ConsoleListener, Session, Sessions
from sluice.protocol import ErrorCode
from sluice.server.http_server import HttpRequest, HttpResponse, HttpServer, Router

__all__ = ["Console", "ConsoleError"]

log = logging.getLogger("sluice.console")

T = TypeVar("T")

MAX_BODY_BYTES: Final = 64 * 1024
DEFAULT_RECORDS: Final = 20
THREADS: Final = 4
"""Threads doing the console's Kafka requests (each login's one at a time)."""
LOGINS_AT_ONCE: Final = 2
"""Logins checked at once; more wait their turn."""
_REALM: Final = 'Basic realm="Sluice console", charset="UTF-8"'
_SECURITY_HEADERS: Final = [
    ("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; "
     "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
]  # fmt: skip
_CONTENT_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
_STATUS_OF_CODE: Final = {
    ErrorCode.topic_authorization_failed: 403,
    ErrorCode.group_authorization_failed: 403,
    ErrorCode.cluster_authorization_failed: 403,
    ErrorCode.unknown_topic_or_partition: 404,
    ErrorCode.group_id_not_found: 404,
    ErrorCode.topic_already_exists: 409,
    ErrorCode.non_empty_group: 409,
    ErrorCode.unknown_member_id: 409,
    ErrorCode.invalid_topic_exception: 400,
    ErrorCode.invalid_partitions: 400,
    ErrorCode.invalid_replication_factor: 400,
    ErrorCode.invalid_replica_assignment: 400,
    ErrorCode.invalid_config: 400,
    ErrorCode.invalid_request: 400,
    ErrorCode.policy_violation: 400,
    ErrorCode.topic_deletion_disabled: 400,
}


class ConsoleError(Exception):
    """An API request refused: its HTTP status, message and error name."""

    def __init__(self, status: int, message: str, code: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass(frozen=True)
class Call:
    """One API request: the path's parameters, the body and the login's session."""

    request: HttpRequest
    params: dict[str, str]
    body: dict[str, Any]
    session: Session


Endpoint = Callable[["Console", Call], Awaitable[tuple[int, Any]]]


def _json(status: int, payload: Any, headers: list[tuple[str, str]] | None = None) -> HttpResponse:
    return HttpResponse(
        status, json.dumps(payload, separators=(",", ":")).encode(), "application/json",
        [*_SECURITY_HEADERS, ("Cache-Control", "no-store"), *(headers or [])],
    )  # fmt: skip


def _error(status: int, message: str, code: str, headers: list[tuple[str, str]] | None = None
           ) -> HttpResponse:  # fmt: skip
    return _json(status, {"error": message, "code": code}, headers)


def _int(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConsoleError(400, f"{name} must be an integer from {low} to {high}", "BAD_REQUEST")
    return value


def _str(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConsoleError(400, f"{name} must be a non-empty string", "BAD_REQUEST")
    return value


def _string_map(value: Any, name: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ConsoleError(400, f"{name} must be an object of string values", "BAD_REQUEST")
    return value


def _is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Console:
    """The web console of one broker: ``await start(host, port)``, ``await stop()``.
    ``listener`` says how its Kafka clients connect; ``metrics_registry`` returns the
    broker's Prometheus registry (None: no metrics)."""

    def __init__(
        self,
        listener: ConsoleListener,
        *,
        broker_id: int,
        version: str,
        metrics_registry: Callable[[], MetricsRegistry | None] = lambda: None,
        view_factory: Callable[[dict[str, Any]], Any] = ClusterView,
        max_sessions: int = 16,
        idle_s: float = 600.0,
    ) -> None:
        self.listener = listener
        self.broker_id = broker_id
        self.version = version
        self._view_factory = view_factory
        self._executor = ThreadPoolExecutor(THREADS, "sluice-console")
        self.sessions = Sessions(self._close_view, time.monotonic, max_sessions=max_sessions,
                                 idle_s=idle_s)  # fmt: skip
        self.metrics = MetricsSampler(metrics_registry, time.monotonic)
        self._logins = asyncio.Semaphore(LOGINS_AT_ONCE)
        self._static = _load_static()
        self.router = Router()
        self.router.add("GET", "/", self._index)
        self.router.add_prefix("GET", "/static/", self._static_file)
        for method in ("GET", "POST", "DELETE", "PUT", "PATCH"):
            self.router.add_prefix(method, "/api/", self._api)
        self.http = HttpServer("console", self.router, max_body_bytes=MAX_BODY_BYTES)
        self.loopback_only = True

    async def start(self, host: str, port: int, ssl_context: ssl.SSLContext | None = None) -> None:
        """Serve on ``host:port``; HTTPS with ``ssl_context`` (``console.ssl.enabled``)."""
        self.loopback_only = _is_loopback(host)
        await self.http.start(host, port, ssl_context)
        login = "HTTP Basic login as SASL " + "/".join(self.listener.mechanisms)
        log.info("console on %s://%s:%d/ (clients on listener %s, %s)", self.http.scheme,
                 host or "0.0.0.0", self.http.port, self.listener.name,
                 login if self.listener.login_required else "no login, User:ANONYMOUS")  # fmt: skip
        if not self.loopback_only and not self.listener.login_required:
            log.warning(
                "the console on %s:%d takes anyone who reaches it without a login, as "
                "User:ANONYMOUS on listener %s", host or "0.0.0.0", self.http.port,
                self.listener.name,
            )  # fmt: skip

    @property
    def port(self) -> int:
        return self.http.port

    @property
    def url(self) -> str:
        """Where a browser on this machine reaches it."""
        host = self.http.host
        host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        return f"{self.http.scheme}://{host}:{self.http.port}/"

    async def stop(self) -> None:
        """Stop serving and close every session's clients now (a call still running on
        a console thread fails at once on its closed connections)."""
        await self.http.stop()
        self._executor.shutdown(wait=False, cancel_futures=True)
        self.sessions.close_all()

    def _close_view(self, view: Any) -> None:
        """Close a view's clients on a console thread (at once when stopping)."""
        try:
            self._executor.submit(view.close)
        except RuntimeError:  # stopping: the executor takes no more work
            view.close()

    async def _work(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    # -- static files ----------------------------------------------------------------------

    async def _index(self, request: HttpRequest) -> HttpResponse:
        return self._file("index.html")

    async def _static_file(self, request: HttpRequest) -> HttpResponse:
        return self._file(request.path.removeprefix("/static/"))

    def _file(self, name: str) -> HttpResponse:
        data = self._static.get(name)
        if data is None:
            return HttpResponse(404, b"not found\n", headers=list(_SECURITY_HEADERS))
        suffix = name[name.rfind(".") :]
        content_type = _CONTENT_TYPES.get(suffix, "application/octet-stream")
        return HttpResponse(200, data, content_type,
                            [*_SECURITY_HEADERS, ("Cache-Control", "no-cache")])  # fmt: skip

    # -- the API ---------------------------------------------------------------------------

    async def _api(self, request: HttpRequest) -> HttpResponse:
        try:
            self._check_host(request)
            endpoint, params = _route(request.method, request.path)
            body: dict[str, Any] = {}
            if request.method in ("POST", "DELETE"):
                _check_origin(request)
                body = _body(request)
            session = await self._session(request)
            async with session.lock:
                status, payload = await endpoint(self, Call(request, params, body, session))
            return _json(status, payload)
        except ConsoleError as exc:
            headers = [("WWW-Authenticate", _REALM)] if exc.status == 401 else None
            return _error(exc.status, str(exc), exc.code, headers)
        except AuthenticationException as exc:
            return _error(401, str(exc), "SASL_AUTHENTICATION_FAILED",
                          [("WWW-Authenticate", _REALM)])  # fmt: skip
        except KafkaException as exc:
            return _kafka_error(exc)

    def _check_host(self, request: HttpRequest) -> None:
        if not self.loopback_only:
            return
        host = urlsplit("//" + request.headers.get("host", "")).hostname or ""
        if not _is_loopback(host):
            raise ConsoleError(403, f"Host {host!r} is not this console's", "FORBIDDEN_HOST")

    async def _session(self, request: HttpRequest) -> Session:
        user = password = None
        if self.listener.login_required:
            user, password = _basic_credentials(request)
        key = self.sessions.key(user, password)
        session = self.sessions.get(key)
        if session is not None:
            return session
        async with self._logins:
            session = self.sessions.get(key)  # logged in while this one waited
            if session is not None:
                return session
            for mechanism in self.listener.mechanisms or (None,):
                config = self.listener.client_config(user, password, mechanism)
                view = await self._work(self._view_factory, config)
                try:
                    await self._work(view.cluster)
                except AuthenticationException:
                    self._close_view(view)
                    continue
                except BaseException:
                    self._close_view(view)
                    raise
                if user is not None:
                    log.info("console login: %s (SASL %s)", user, mechanism)
                return self.sessions.add(key, user, view)
        raise ConsoleError(401, "login failed: wrong user name or password", "LOGIN_FAILED")


def _kafka_error(exc: KafkaException) -> HttpResponse:
    """A Kafka error as an HTTP answer: 4xx for what the request did, 503 for what may
    pass (retriable), 500 otherwise."""
    status = _STATUS_OF_CODE.get(exc.code) or (503 if exc.retriable else 500)
    return _error(status, str(exc), exc.error_name)


def _basic_credentials(request: HttpRequest) -> tuple[str, str]:
    scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "basic":
        raise ConsoleError(401, "log in with the user name and password of a Kafka user",
                           "LOGIN_REQUIRED")  # fmt: skip
    try:
        text = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise ConsoleError(401, "malformed Basic credentials", "LOGIN_REQUIRED") from None
    user, sep, password = text.partition(":")
    if not sep or not user:
        raise ConsoleError(401, "malformed Basic credentials", "LOGIN_REQUIRED")
    return user, password


def _check_origin(request: HttpRequest) -> None:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise ConsoleError(415, "changes take Content-Type: application/json",
                           "UNSUPPORTED_MEDIA_TYPE")  # fmt: skip
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        raise ConsoleError(403, f"cross-site request refused ({site})", "CROSS_ORIGIN")
    origin = request.headers.get("origin")
    if origin is not None:
        parts = urlsplit(origin)
        if parts.netloc.lower() != request.headers.get("host", "").lower():
            raise ConsoleError(403, f"cross-origin request refused ({origin})", "CROSS_ORIGIN")


def _body(request: HttpRequest) -> dict[str, Any]:
    if not request.body:
        if request.method == "DELETE":
            return {}
        raise ConsoleError(400, "a JSON object is expected", "BAD_REQUEST")
    try:
        body = json.loads(request.body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConsoleError(400, f"malformed JSON: {exc}", "BAD_REQUEST") from None
    if not isinstance(body, dict):
        raise ConsoleError(400, "a JSON object is expected", "BAD_REQUEST")
    return body


def _load_static() -> dict[str, bytes]:
    """The app's files (flat), read once."""
    files: dict[str, bytes] = {}
    for entry in resources.files("sluice.console").joinpath("static").iterdir():
        if entry.is_file():
            files[entry.name] = entry.read_bytes()
    return files


# -- endpoints ---------------------------------------------------------------------------------


async def _session_info(console: Console, call: Call) -> tuple[int, Any]:
    return 200, {
        "login_required": console.listener.login_required,
        "user": call.session.user,
        "listener": console.listener.name,
        "security_protocol": console.listener.security_protocol,
        "broker_id": console.broker_id,
        "version": console.version,
    }


async def _cluster(console: Console, call: Call) -> tuple[int, Any]:
    cluster = await console._work(call.session.view.cluster)
    return 200, {**cluster, "broker_id": console.broker_id, "version": console.version}


async def _topics(console: Console, call: Call) -> tuple[int, Any]:
    internal = call.request.param("internal", "false") == "true"
    return 200, {"topics": await console._work(call.session.view.topics, internal)}


async def _topic(console: Console, call: Call) -> tuple[int, Any]:
    return 200, await console._work(call.session.view.topic, call.params["topic"])


async def _create_topic(console: Console, call: Call) -> tuple[int, Any]:
    body = call.body
    name = _str(body.get("name"), "name")
    partitions = _int(body.get("partitions", -1), "partitions", -1, 100_000)
    replication = _int(body.get("replication_factor", -1), "replication_factor", -1, 1000)
    if partitions == 0 or replication == 0:
        raise ConsoleError(400, "partitions and replication_factor must be at least 1, or -1 "
                           "for the broker's default", "BAD_REQUEST")  # fmt: skip
    configs = _string_map(body.get("configs", {}), "configs")
    created = await console._work(
        call.session.view.create_topic, name, partitions, replication, configs
    )
    return 201, created


async def _delete_topic(console: Console, call: Call) -> tuple[int, Any]:
    await console._work(call.session.view.delete_topic, call.params["topic"])
    return 200, {"deleted": call.params["topic"]}


async def _alter_configs(console: Console, call: Call) -> tuple[int, Any]:
    set_ = _string_map(call.body.get("set", {}), "set")
    delete = call.body.get("delete", [])
    if not isinstance(delete, list) or not all(isinstance(k, str) and k for k in delete):
        raise ConsoleError(400, "delete must be a list of config names", "BAD_REQUEST")
    if not set_ and not delete:
        raise ConsoleError(400, "nothing to change: give set and/or delete", "BAD_REQUEST")
    configs = await console._work(
        call.session.view.alter_topic_configs, call.params["topic"], set_, delete
    )
    return 200, {"name": call.params["topic"], "configs": configs}


async def _records(console: Console, call: Call) -> tuple[int, Any]:
    try:
        partition = int(call.params["partition"])
        limit = int(call.request.param("limit", str(DEFAULT_RECORDS)) or DEFAULT_RECORDS)
    except ValueError:
        raise ConsoleError(400, "partition and limit must be integers", "BAD_REQUEST") from None
    _int(partition, "partition", 0, 1_000_000)
    _int(limit, "limit", 1, MAX_RECORDS)
    return 200, await console._work(
        call.session.view.records, call.params["topic"], partition, limit
    )


async def _groups(console: Console, call: Call) -> tuple[int, Any]:
    return 200, {"groups": await console._work(call.session.view.groups)}


async def _group(console: Console, call: Call) -> tuple[int, Any]:
    return 200, await console._work(call.session.view.group, call.params["group"])


async def _reset_offsets(console: Console, call: Call) -> tuple[int, Any]:
    to = call.body.get("to")
    if to not in ("earliest", "latest", "offset"):
        raise ConsoleError(400, "to must be earliest, latest or offset", "BAD_REQUEST")
    offset = None
    if to == "offset":
        offset = _int(call.body.get("offset"), "offset", 0, 2**63 - 1)
    topic = call.body.get("topic")
    if topic is not None:
        topic = _str(topic, "topic")
    return 200, await console._work(
        call.session.view.reset_group_offsets, call.params["group"], to, offset, topic
    )


async def _metrics(console: Console, call: Call) -> tuple[int, Any]:
    return 200, console.metrics.sample()


_ROUTES: Final[list[tuple[str, tuple[str, ...], Endpoint]]] = [
    ("GET", ("session",), _session_info),
    ("GET", ("cluster",), _cluster),
    ("GET", ("topics",), _topics),
    ("POST", ("topics",), _create_topic),
    ("GET", ("topics", "{topic}"), _topic),
    ("DELETE", ("topics", "{topic}"), _delete_topic),
    ("POST", ("topics", "{topic}", "configs"), _alter_configs),
    ("GET", ("topics", "{topic}", "partitions", "{partition}", "records"), _records),
    ("GET", ("groups",), _groups),
    ("GET", ("groups", "{group}"), _group),
    ("POST", ("groups", "{group}", "offsets"), _reset_offsets),
    ("GET", ("metrics",), _metrics),
]


def _route(method: str, path: str) -> tuple[Endpoint, dict[str, str]]:
    """The endpoint of ``method`` and ``path`` (under /api/) and its path parameters."""
    segments = [unquote(s) for s in path.removeprefix("/api/").split("/")]
    allowed = False
    for route_method, pattern, endpoint in _ROUTES:
        if len(pattern) != len(segments):
            continue
        params: dict[str, str] = {}
        for want, got in zip(pattern, segments, strict=True):
            if want.startswith("{"):
                if not got:
                    break
                params[want[1:-1]] = got
            elif want != got:
                break
        else:
            if route_method == method:
                return endpoint, params
            allowed = True
    if allowed:
        raise ConsoleError(405, f"{method} is not allowed on {path}", "METHOD_NOT_ALLOWED")
    raise ConsoleError(404, f"no API at {path}", "NOT_FOUND")
