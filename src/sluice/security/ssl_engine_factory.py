"""TLS contexts from Kafka's ``ssl.*`` settings, for broker listeners and for clients.

As Kafka's ``DefaultSslEngineFactory``, this turns the ``ssl.*`` configs into the TLS
machinery, here Python's :mod:`ssl` (OpenSSL) ``SSLContext``; all cryptography is
OpenSSL's, and the ``cryptography`` package reads PKCS#12 stores. The settings, with
Kafka's names and meanings:

* ``ssl.keystore.type``: ``PEM`` (Sluice's default; Kafka's is JKS, which Sluice does
  not read) or ``PKCS12``. A PEM keystore is ``ssl.keystore.location``, a file holding
  the private key and the certificate chain, or inline ``ssl.keystore.key`` and
  ``ssl.keystore.certificate.chain``; ``ssl.key.password`` decrypts an encrypted key
  (``ssl.keystore.password`` is refused for PEM, as Kafka refuses it). A PKCS#12
  keystore is read with ``ssl.keystore.password``.
* ``ssl.truststore.type`` (``PEM``/``PKCS12``), ``ssl.truststore.location`` or inline
  ``ssl.truststore.certificates`` (PEM), ``ssl.truststore.password`` (PKCS#12 only):
  the CAs a peer's certificate must chain to; unset, the system's CAs.
* ``ssl.enabled.protocols`` (TLSv1.2, TLSv1.3 by default) bound the versions
  negotiated; when it is empty, ``ssl.protocol`` (TLSv1.3 by default) is the highest.
* ``ssl.cipher.suites``: the TLS 1.2 suites allowed, by OpenSSL or IANA (Java) name,
  and the TLS 1.3 suites: Python's ssl cannot choose among those, so a list names all
  of them (TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384,
  TLS_CHACHA20_POLY1305_SHA256) or none (then TLS 1.3 is off), and a list of TLS 1.3
  suites alone turns TLS 1.2 off. Empty: OpenSSL's defaults.
* servers: ``ssl.client.auth`` (``none``/``requested``/``required``) whether a client
  certificate is asked for and whether one is needed;
* clients: ``ssl.endpoint.identification.algorithm`` (``https``, the default: the
  server's certificate must name the host connected to; empty: any host).

Bad settings raise :class:`SslConfigError` naming the key; the broker and the clients
turn it into their own configuration error.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CLIENT_AUTH",
    "SSL_CLIENT_CONFIGS",
    "SSL_SERVER_CONFIGS",
    "SslConfigError",
    "SslEngineFactory",
    "SslSetting",
]


class SslConfigError(ValueError):
    """An ``ssl.*`` setting is invalid, or the keys and certificates it names are."""


@dataclass(frozen=True, slots=True)
class SslSetting:
    """One ``ssl.*`` key: its Kafka type (string, list or password), default and meaning."""

    name: str
    type: str
    default: Any
    doc: str


_TLS13_SUITES = frozenset(
    {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}
)
# TLS 1.2 suites by their IANA (Java) names -> OpenSSL's.
_IANA_TO_OPENSSL = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
}
_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_STORE_TYPES = ("PEM", "PKCS12")
CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)

SSL_CLIENT_CONFIGS: tuple[SslSetting, ...] = (
    SslSetting("ssl.protocol", "string", "TLSv1.3",
               "The highest TLS version when ssl.enabled.protocols is empty."),
    SslSetting("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"],
               "The TLS versions that may be negotiated."),
    SslSetting("ssl.cipher.suites", "list", [],
               "The cipher suites allowed (OpenSSL or IANA names); empty: OpenSSL's."),
    SslSetting("ssl.keystore.type", "string", "PEM", "PEM or PKCS12 (Kafka's JKS is not read)."),
    SslSetting("ssl.keystore.location", "string", None,
               "The keystore file: for PEM, the private key and the certificate chain."),
    SslSetting("ssl.keystore.password", "password", None, "The PKCS12 keystore's password."),
    SslSetting("ssl.key.password", "password", None, "The PEM private key's password."),
    SslSetting("ssl.keystore.key", "password", None, "The private key, PEM, inline."),
    SslSetting("ssl.keystore.certificate.chain", "password", None,
               "The certificate chain, PEM, inline."),
    SslSetting("ssl.truststore.type", "string", "PEM", "PEM or PKCS12."),
    SslSetting("ssl.truststore.location", "string", None,
               "The CA certificates to trust (unset: the system's)."),
    SslSetting("ssl.truststore.password", "password", None, "The PKCS12 truststore's password."),
    SslSetting("ssl.truststore.certificates", "password", None,
               "The CA certificates to trust, PEM, inline."),
    SslSetting("ssl.endpoint.identification.algorithm", "string", "https",
               "https: the server's certificate must name the host connected to; empty: off."),
)  # fmt: skip
"""The ``ssl.*`` keys of a TLS client (Kafka's client SSL configs)."""

SSL_SERVER_CONFIGS: tuple[SslSetting, ...] = (
    *SSL_CLIENT_CONFIGS,
    SslSetting("ssl.client.auth", "string", "none",
               "none, requested or required: whether clients present a certificate."),
    SslSetting("ssl.principal.mapping.rules", "string", "DEFAULT",
               "Rules mapping a client certificate's distinguished name to its principal "
               "name: DEFAULT or RULE:pattern/replacement/[LU], comma-separated."),
)  # fmt: skip
"""The ``ssl.*`` keys of a broker (its listeners, and its clients to other brokers)."""


_DEFAULTS = {s.name: s.default for s in SSL_SERVER_CONFIGS}


class SslEngineFactory:
    """Builds TLS contexts from ``ssl.*`` values (``values[key]`` typed as the key's type,
    None when unset: then the key's default); checks them when made."""

    def __init__(self, values: Mapping[str, Any] | Callable[[str], Any]) -> None:
        get = values if callable(values) else values.get
        self._get: Callable[[str], Any] = get
        self._check()

    def value(self, key: str) -> Any:
        value = self._get(key)
        return _DEFAULTS.get(key) if value is None else value

    # -- contexts -------------------------------------------------------------------------
    def server_context(self) -> ssl.SSLContext:
        """A server's context: its keystore (required), the client authentication asked."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._versions_and_ciphers(context)
        if not self._has_keystore():
            raise SslConfigError(
                "an SSL listener needs a keystore: set ssl.keystore.location, or "
                "ssl.keystore.key and ssl.keystore.certificate.chain"
            )
        self._load_keystore(context)
        client_auth = str(self.value("ssl.client.auth") or "none").lower()
        context.verify_mode = CLIENT_AUTH[client_auth]
        if context.verify_mode != ssl.CERT_NONE:
            self._load_truststore(context, ssl.Purpose.CLIENT_AUTH)
        context.options |= ssl.OP_NO_RENEGOTIATION
        return context

    def client_context(self) -> ssl.SSLContext:
        """A client's context: the server verified against the truststore (and its host
        name, with ``ssl.endpoint.identification.algorithm=https``); the keystore, if
        set, for client authentication."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self._versions_and_ciphers(context)
        context.check_hostname = self.checks_hostname
        context.verify_mode = ssl.CERT_REQUIRED
        self._load_truststore(context, ssl.Purpose.SERVER_AUTH)
        if self._has_keystore():
            self._load_keystore(context)
        return context

    @property
    def checks_hostname(self) -> bool:
        return str(self.value("ssl.endpoint.identification.algorithm") or "").lower() == "https"

    # -- checks ---------------------------------------------------------------------------
    def _check(self) -> None:
        for key in ("ssl.keystore.type", "ssl.truststore.type"):
            kind = str(self.value(key) or "PEM").upper()
            if kind not in _STORE_TYPES:
                raise SslConfigError(
                    f"{key}={kind} is not supported: use PEM or PKCS12 (JKS keystores can be "
                    "converted with keytool -importkeystore -deststoretype PKCS12)"
                )
        client_auth = self.value("ssl.client.auth")
        if client_auth is not None and str(client_auth).lower() not in CLIENT_AUTH:
            raise SslConfigError(
                f"invalid value {client_auth!r} for ssl.client.auth: one of none, requested, "
                "required"
            )
        algorithm = str(self.value("ssl.endpoint.identification.algorithm") or "")
        if algorithm.lower() not in ("", "https"):
            raise SslConfigError(
                f"invalid value {algorithm!r} for ssl.endpoint.identification.algorithm: "
                "https or empty"
            )
        if self._store_type("ssl.keystore.type") == "PEM":
            if self.value("ssl.keystore.password") is not None:
                raise SslConfigError(
                    "ssl.keystore.password cannot be specified with PEM format, only "
                    "ssl.key.password may be specified"
                )
            inline = [k for k in ("ssl.keystore.key", "ssl.keystore.certificate.chain")
                      if self.value(k) is not None]  # fmt: skip
            if inline and self.value("ssl.keystore.location") is not None:
                raise SslConfigError(
                    "ssl.keystore.location cannot be set with ssl.keystore.key or "
                    "ssl.keystore.certificate.chain"
                )
            if len(inline) == 1:
                raise SslConfigError(
                    "ssl.keystore.key and ssl.keystore.certificate.chain go together"
                )
        if self._store_type("ssl.truststore.type") == "PEM" and (
            self.value("ssl.truststore.password") is not None
        ):
            raise SslConfigError("ssl.truststore.password cannot be specified for PEM format")
        if (
            self.value("ssl.truststore.location") is not None
            and self.value("ssl.truststore.certificates") is not None
        ):
            raise SslConfigError(
                "ssl.truststore.location cannot be set with ssl.truststore.certificates"
            )
        self._version_bounds()
        self._cipher_choice()

    def _store_type(self, key: str) -> str:
        return str(self.value(key) or "PEM").upper()

    def _has_keystore(self) -> bool:
        return (
            self.value("ssl.keystore.location") is not None
            or self.value("ssl.keystore.key") is not None
        )

    # -- versions and ciphers ---------------------------------------------------------------
    def _version_bounds(self) -> tuple[ssl.TLSVersion | None, ssl.TLSVersion | None]:
        enabled = list(self.value("ssl.enabled.protocols") or [])
        protocol = str(self.value("ssl.protocol") or "TLSv1.3")
        if protocol not in _VERSIONS and protocol != "TLS":
            raise SslConfigError(
                f"invalid value {protocol!r} for ssl.protocol: TLS, {', '.join(_VERSIONS)}"
            )
        if not enabled:
            return None, _VERSIONS.get(protocol)
        unknown = [p for p in enabled if p not in _VERSIONS]
        if unknown:
            raise SslConfigError(
                f"ssl.enabled.protocols: unknown protocol {unknown[0]!r} (one of "
                f"{', '.join(_VERSIONS)})"
            )
        order = list(_VERSIONS)
        indexes = sorted(order.index(p) for p in set(enabled))
        if indexes != list(range(indexes[0], indexes[-1] + 1)):
            raise SslConfigError(
                "ssl.enabled.protocols must name consecutive versions (OpenSSL takes a "
                f"lowest and a highest): {', '.join(enabled)}"
            )
        return _VERSIONS[order[indexes[0]]], _VERSIONS[order[indexes[-1]]]

    def _cipher_choice(self) -> tuple[str | None, bool, bool]:
        """(OpenSSL cipher string for TLS <= 1.2 or None, TLS 1.2 on, TLS 1.3 on)."""
        suites = [str(s) for s in self.value("ssl.cipher.suites") or []]
        if not suites:
            return None, True, True
        tls13 = {s for s in suites if s in _TLS13_SUITES}
        if tls13 and tls13 != _TLS13_SUITES:
            raise SslConfigError(
                "ssl.cipher.suites: Python's ssl cannot choose among TLS 1.3 suites; name all "
                f"of {', '.join(sorted(_TLS13_SUITES))} or none (TLS 1.3 off)"
            )
        names = [_IANA_TO_OPENSSL.get(s, s) for s in suites if s not in _TLS13_SUITES]
        for name in names:
            if name.startswith(("TLS_", "SSL_")):
                raise SslConfigError(
                    f"ssl.cipher.suites: unknown cipher suite {name!r}; give OpenSSL's name "
                    "(e.g. ECDHE-RSA-AES128-GCM-SHA256)"
                )
        return (":".join(names) or None), bool(names), bool(tls13)

    def _versions_and_ciphers(self, context: ssl.SSLContext) -> None:
        low, high = self._version_bounds()
        ciphers, tls12, tls13 = self._cipher_choice()
        if not tls13 and (high is None or high > ssl.TLSVersion.TLSv1_2):
            high = ssl.TLSVersion.TLSv1_2
        if not tls12 and (low is None or low < ssl.TLSVersion.TLSv1_3):
            low = ssl.TLSVersion.TLSv1_3
        if low is not None and high is not None and low > high:
            raise SslConfigError(
                "ssl.cipher.suites leaves no version of ssl.enabled.protocols usable"
            )
        if low is not None:
            context.minimum_version = low
        if high is not None:
            context.maximum_version = high
        if ciphers is not None:
            try:
                context.set_ciphers(ciphers)
            except ssl.SSLError:
                raise SslConfigError(
                    f"ssl.cipher.suites: OpenSSL knows none of {ciphers}"
                ) from None

    # -- stores ---------------------------------------------------------------------------
    def _load_keystore(self, context: ssl.SSLContext) -> None:
        if self._store_type("ssl.keystore.type") == "PKCS12":
            pem, password = self._pkcs12_keystore(), None
        else:
            location = self.value("ssl.keystore.location")
            if location is not None:
                pem = _read(location, "ssl.keystore.location")
            else:
                pem = _normalized_pem(str(self.value("ssl.keystore.key")), "ssl.keystore.key")
                pem += _normalized_pem(
                    str(self.value("ssl.keystore.certificate.chain")),
                    "ssl.keystore.certificate.chain",
                )
            password = self.value("ssl.key.password")
        try:
            with _private_file(pem) as path:
                context.load_cert_chain(path, password=password)
        except (ssl.SSLError, OSError) as exc:
            where = self.value("ssl.keystore.location") or "ssl.keystore.key"
            raise SslConfigError(
                f"cannot load the keystore {where}: {_reason(exc)} (a PEM keystore holds the "
                "private key and the certificate chain; ssl.key.password decrypts the key)"
            ) from None

    def _pkcs12_keystore(self) -> bytes:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12

        location = self.value("ssl.keystore.location")
        if location is None:
            raise SslConfigError("ssl.keystore.type=PKCS12 needs ssl.keystore.location")
        password = self.value("ssl.keystore.password")
        key_password = self.value("ssl.key.password")
        if key_password is not None and key_password != password:
            raise SslConfigError(
                "a PKCS12 keystore is read with ssl.keystore.password; a different "
                "ssl.key.password is not supported"
            )
        try:
            key, cert, extra = pkcs12.load_key_and_certificates(
                _read(location, "ssl.keystore.location"),
                password.encode() if password else None,
            )
        except ValueError as exc:
            raise SslConfigError(f"cannot read the PKCS12 keystore {location}: {exc}") from None
        if key is None or cert is None:
            raise SslConfigError(f"the PKCS12 keystore {location} holds no key and certificate")
        out = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )  # fmt: skip
        for c in (cert, *extra):
            out += c.public_bytes(serialization.Encoding.PEM)
        return out

    def _load_truststore(self, context: ssl.SSLContext, purpose: ssl.Purpose) -> None:
        location = self.value("ssl.truststore.location")
        inline = self.value("ssl.truststore.certificates")
        if location is None and inline is None:
            context.load_default_certs(purpose)
            return
        if self._store_type("ssl.truststore.type") == "PKCS12":
            cadata = self._pkcs12_truststore()
        elif location is not None:
            cadata = _read(location, "ssl.truststore.location").decode("ascii", "replace")
        else:
            cadata = _normalized_pem(str(inline), "ssl.truststore.certificates").decode()
        try:
            context.load_verify_locations(cadata=cadata)
        except (ssl.SSLError, ValueError) as exc:
            raise SslConfigError(
                f"cannot load the truststore {location or 'ssl.truststore.certificates'}: "
                f"{_reason(exc)}"
            ) from None

    def _pkcs12_truststore(self) -> str:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12

        location = self.value("ssl.truststore.location")
        if location is None:
            raise SslConfigError("ssl.truststore.type=PKCS12 needs ssl.truststore.location")
        password = self.value("ssl.truststore.password")
        try:
            store = pkcs12.load_pkcs12(
                _read(location, "ssl.truststore.location"),
                password.encode() if password else None,
            )
        except ValueError as exc:
            raise SslConfigError(f"cannot read the PKCS12 truststore {location}: {exc}") from None
        certs = [c.certificate for c in store.additional_certs]
        if store.cert is not None:
            certs.append(store.cert.certificate)
        return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason).lower().replace("_", " ")
    return str(exc)


def _read(location: object, key: str) -> bytes:
    try:
        return Path(str(location)).read_bytes()
    except OSError as exc:
        raise SslConfigError(f"cannot read {key} {location}: {exc.strerror or exc}") from None


def _normalized_pem(text: str, key: str) -> bytes:
    """PEM blocks as OpenSSL reads them, from inline text whose line breaks may have been
    lost (a properties value continued over lines)."""
    blocks = _PEM_BLOCK.findall(text)
    if not blocks:
        raise SslConfigError(f"{key}: no PEM block (-----BEGIN ...-----) found")
    out = []
    for label, body in blocks:
        data = "".join(body.split())
        lines = [data[i : i + 64] for i in range(0, len(data), 64)]
        out.append(f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----\n")
    return "".join(out).encode("ascii")


@contextlib.contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    """A path OpenSSL can read ``data`` from (it loads keys from files only): an anonymous
    memory file where Linux has them, else a temporary file readable by its owner only;
    gone once the block ends."""
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is not None and Path("/proc/self/fd").is_dir():
        fd = memfd_create("sluice-keystore", getattr(os, "MFD_CLOEXEC", 0))
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="sluice-keystore-") as directory:
        path = Path(directory) / "keystore.pem"
        path.touch(mode=0o600)
        path.write_bytes(data)
        yield str(path)
