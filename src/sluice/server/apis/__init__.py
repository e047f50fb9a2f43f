"""The APIs a broker serves: one module per API, each declaring its key and versions, and
the registry that finds them.

An API module (``heartbeat.py``, ``produce.py``, ...) opens with a short note on the API's
behaviour and the versions it serves, then declares them next to its handler::

    if TYPE_CHECKING:
        import kio.schema.heartbeat.v0.request as v0
        ...
        import kio.schema.heartbeat.v4.request as v4

        Body: TypeAlias = v0.HeartbeatRequest | ... | v4.HeartbeatRequest

    API: ApiSpec[Body] = ApiSpec(ApiKey.HEARTBEAT, 0, 4)


    def handle(ctx: RequestContext, request: Request) -> Any:
        body = API.body(request)  # typed as Body
        ...

``Body`` is the union of kio's request classes of the versions served, so mypy checks the
handler against each of them (``tests/server/test_apis.py`` checks that the union holds
exactly those versions). ``handle`` returns the response dataclass of the request's
version, an awaitable of one (an ``Answer`` for anything that parks in a purgatory), or
None for no response (acks=0 Produce). It uses only what its
:class:`~sluice.server.request_context.RequestContext` holds; state lives there, never
here. Kafka error codes go in the response, never as exceptions.

:func:`registry` imports every module of this package (found by ``pkgutil``: there is no
list to keep) and builds from their specs the handler table and the
:class:`~sluice.protocol.VersionTable` the broker decodes with and advertises in
ApiVersions. Adding an API is adding a module.

The broker imports the modules before its listeners open, since it must know the
versions by then. So a module imports at its top only what the broker has loaded by
then (the protocol, the replica manager, the log, the topic registry, ...): the
coordinators and their runtimes (``sluice.coordinator``, ``server/group_runtime.py``,
``server/txn_runtime.py``) are imported inside the functions that use them, which run
only once the coordinators exist, and kio's request classes only for type checking (the
decoder imports each version's class when a request of it first arrives).
``tests/server/test_startup_imports.py`` checks both.

A single node serves the APIs whose spec says ``needs_coordinators=False`` as soon as its
listeners open. Requests of the others are held until the group and transaction
coordinators are built, then answered in arrival order (``server/request_gate.py``). Kafka
instead enables every API at once and its coordinator APIs answer retriable errors until
the coordinators have loaded.

The controller's inter-broker APIs (LeaderAndIsr, StopReplica, UpdateMetadata,
ControlledShutdown) declare a :class:`RawApiSpec`: kio has no schema for them, so
:mod:`sluice.server.inter_broker` decodes their requests and encodes their answers. They
are not advertised in ApiVersions, and a broker serves them only in cluster mode, where
their ``handle(cluster, request)`` takes the broker's ``ClusterManager``.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar, cast

from kio.static.protocol import RequestPayload

from sluice.protocol import ApiKey, ApiVersionRange, Request, VersionTable
from sluice.protocol.apis import InterBrokerApiKey

if TYPE_CHECKING:
    from sluice.server.cluster import ClusterManager
    from sluice.server.request_context import RequestContext

__all__ = ["ApiRegistry", "ApiSpec", "RawApiSpec", "registry"]

BodyT = TypeVar("BodyT", bound=RequestPayload, covariant=True)

Handler = Callable[["RequestContext", Request], Any]
"""An API module's ``handle``: a response, an awaitable of one, or None."""

RawHandler = Callable[[bytes], bytes | Awaitable[bytes]]
"""An inter-broker request frame in, the framed answer (or an awaitable of it) out."""


class ApiSpec(Generic[BodyT]):
    """One API as its module serves it: the key, the request versions accepted (and the
    minimum advertised, where lower), and whether its handler needs the coordinators.
    ``BodyT`` is the union of kio's request classes of those versions."""

    __slots__ = ("key", "needs_coordinators", "versions")

    def __init__(
        self,
        key: ApiKey,
        min_version: int,
        max_version: int,
        *,
        advertised_min_version: int | None = None,
        needs_coordinators: bool = True,
    ) -> None:
        self.key: Final = key
        self.versions: Final = ApiVersionRange(
            key, min_version, max_version, advertised_min_version
        )
        """What ApiVersions advertises and the decoder accepts."""
        self.needs_coordinators: Final = needs_coordinators
        """False: a single node serves it before its coordinators are built (the handler
        touches neither coordinator)."""

    def __repr__(self) -> str:
        v = self.versions
        return f"ApiSpec({self.key.name}, {v.min_version}, {v.max_version})"

    def body(self, request: Request) -> BodyT:
        """``request``'s body, typed as ``BodyT``: the decoder accepts only the versions
        declared here and gives each its kio class. A request of another API is a
        programming error."""
        if request.header.api_key != self.key:
            raise TypeError(f"a request of API key {request.header.api_key}, not {self.key.name}")
        return cast(BodyT, request.body)


class RawApiSpec:
    """An inter-broker API of the ZooKeeper-mode controller, which kio has no schema for:
    its requests are decoded and its answers encoded by :mod:`sluice.server.inter_broker`,
    in the one version each speaks; served in cluster mode only, never advertised."""

    __slots__ = ("key",)

    def __init__(self, key: InterBrokerApiKey) -> None:
        self.key: Final = key

    def __repr__(self) -> str:
        return f"RawApiSpec({self.key.name})"


class ApiRegistry:
    """The API modules, by key: their specs, handlers and the version table."""

    __slots__ = ("_modules", "_raw", "specs", "versions")

    def __init__(self, modules: Iterable[ModuleType]) -> None:
        specs: dict[int, ApiSpec[RequestPayload]] = {}
        by_key: dict[int, ModuleType] = {}
        raw: dict[int, ModuleType] = {}
        for module in modules:
            _handle(module)  # raises TypeError if it has none
            spec = getattr(module, "API", None)
            if not isinstance(spec, ApiSpec | RawApiSpec):
                raise TypeError(f"{module.__name__} declares no API spec")
            if spec.key in by_key or spec.key in raw:
                raise ValueError(f"{module.__name__}: API key {spec.key} declared twice")
            if isinstance(spec, ApiSpec):
                specs[spec.key], by_key[spec.key] = spec, module
            else:
                raw[spec.key] = module
        self.specs: Final[Mapping[int, ApiSpec[RequestPayload]]] = dict(sorted(specs.items()))
        self.versions: Final = VersionTable(spec.versions for spec in self.specs.values())
        """The versions a broker accepts and advertises: every API with a module."""
        self._modules = by_key
        self._raw = raw

    def handlers(self, keys: Iterable[int] | None = None) -> dict[int, Handler]:
        """API key -> the module's ``handle`` as it is now (a test may wrap one before a
        broker starts), for ``keys`` (default: every API in :attr:`versions`)."""
        keys = self.specs if keys is None else keys
        return {key: _handle(self._modules[key]) for key in keys}

    @property
    def served_before_coordinators(self) -> list[int]:
        """The keys of the APIs whose handlers need neither coordinator."""
        return [key for key, spec in self.specs.items() if not spec.needs_coordinators]

    @property
    def raw_keys(self) -> list[int]:
        """The keys of the inter-broker APIs."""
        return sorted(self._raw)

    def raw_handlers(self, cluster: ClusterManager) -> dict[int, RawHandler]:
        """The inter-broker APIs' handlers, served by ``cluster`` (cluster mode only)."""
        from sluice.server.inter_broker import serve_raw_request

        return {
            key: functools.partial(
                serve_raw_request, handle=functools.partial(_handle(module), cluster)
            )
            for key, module in sorted(self._raw.items())
        }


def _handle(module: ModuleType) -> Callable[..., object]:
    """The module's ``handle``: ``(ctx, request)`` for an :class:`ApiSpec`,
    ``(cluster, request)`` for a :class:`RawApiSpec`."""
    handle: Callable[..., object] | None = getattr(module, "handle", None)
    if not callable(handle):
        raise TypeError(f"{module.__name__} has no handle()")
    return handle


@functools.cache
def registry() -> ApiRegistry:
    """Every API module of this package, imported once."""
    return ApiRegistry(
        importlib.import_module(f"{__name__}.{info.name}")
        for info in pkgutil.iter_modules(__path__)
    )
