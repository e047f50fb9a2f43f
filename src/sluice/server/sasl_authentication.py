"""A SASL listener's authentication, as the network shell applies it.

:class:`ServerAuthentication` is what a SASL_PLAINTEXT or SASL_SSL listener's
:class:`~sluice.server.network.KafkaServer` holds: it makes each connection's
:class:`~sluice.security.sasl.authenticator.SaslServerAuthenticator` (the sans-I/O state
machine) and carries what the shell needs around it — the failed-authentication delay
(``connection.failed.authentication.delay.ms``) and the timer that waits it out. What a
connection does with each step is in ``KafkaConnectionProtocol`` (``_authenticate``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sluice.base.clock import Clock
from sluice.security.sasl.authenticator import SaslServerAuthenticator, SaslServerConfig
from sluice.timer import TimerTask

__all__ = ["ServerAuthentication"]

Schedule = Callable[[int, Callable[[], object]], TimerTask]
"""Call a function on the event loop after a delay in ms (``EventLoopTimer.schedule``)."""


@dataclass(frozen=True, slots=True)
class ServerAuthentication:
    """One SASL listener's authentication settings and delay timer."""

    config: SaslServerConfig
    clock: Clock
    failed_authentication_delay_ms: int
    schedule: Schedule
    max_receive_size: int = 524_288
    """``sasl.server.max.receive.size``: the largest frame before authentication."""

    def new_authenticator(self) -> SaslServerAuthenticator:
        return SaslServerAuthenticator(self.config, self.clock)
