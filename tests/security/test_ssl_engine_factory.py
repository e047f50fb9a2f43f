"""ssl.* settings to TLS contexts, checked by handshakes between memory BIOs (no
sockets): keystores and truststores in each form, client authentication, versions and
cipher suites, and the errors that name the setting."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from sluice.security.certificates import DevelopmentPki, write_development_pki
from sluice.security.ssl_engine_factory import SslConfigError, SslEngineFactory


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> DevelopmentPki:
    return write_development_pki(tmp_path_factory.mktemp("pki"), ["127.0.0.1"], ["ann"])


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> tuple[ssl.SSLObject, Any]:
    """Run a handshake between two memory-BIO ends; the server end and the error, if any."""
    s_in, s_out, c_in, c_out = (ssl.MemoryBIO() for _ in range(4))
    s = server.wrap_bio(s_in, s_out, server_side=True)
    c = client.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    done = {id(s): False, id(c): False}
    for _ in range(20):
        for end, outgoing, peer_in in ((c, c_out, s_in), (s, s_out, c_in)):
            if not done[id(end)]:
                try:
                    end.do_handshake()
                    done[id(end)] = True
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                    pass
                except ssl.SSLError as exc:
                    return s, exc
            if outgoing.pending:
                peer_in.write(outgoing.read())
        if all(done.values()):
            if s_out.pending:  # TLS 1.3: the client learns of a refused certificate late
                c_in.write(s_out.read())
            try:
                c.read(1)
            except ssl.SSLWantReadError:
                return s, None
            except ssl.SSLError as exc:
                return s, exc
    raise AssertionError("the handshake did not end")


def _server(pki: DevelopmentPki, **extra: Any) -> ssl.SSLContext:
    values = {"ssl.keystore.location": str(pki.broker), **extra}
    return SslEngineFactory(values).server_context()


def _client(pki: DevelopmentPki, **extra: Any) -> ssl.SSLContext:
    return SslEngineFactory({"ssl.truststore.location": str(pki.ca), **extra}).client_context()


def test_a_pem_keystore_serves_and_a_pem_truststore_verifies(pki: DevelopmentPki) -> None:
    server, error = _handshake(_server(pki), _client(pki))
    assert error is None
    assert server.version() == "TLSv1.3"
    assert server.getpeercert() is None  # ssl.client.auth=none: no certificate asked


def test_an_inline_truststore_and_pkcs12_stores(pki: DevelopmentPki, tmp_path: Path) -> None:
    inline = pki.ca.read_text().replace("\n", "")  # a continued properties value
    client = SslEngineFactory({"ssl.truststore.certificates": inline}).client_context()
    assert _handshake(_server(pki), client)[1] is None
    ca = x509.load_pem_x509_certificate(pki.ca.read_bytes())
    trust = tmp_path / "trust.p12"
    trust.write_bytes(pkcs12.serialize_key_and_certificates(
        None, None, None, [ca], serialization.BestAvailableEncryption(b"pw"),
    ))  # fmt: skip
    client = SslEngineFactory({
        "ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(trust),
        "ssl.truststore.password": "pw",
    }).client_context()  # fmt: skip
    assert _handshake(_server(pki), client)[1] is None


def test_client_authentication(pki: DevelopmentPki, tmp_path: Path) -> None:
    required = _server(pki, **{"ssl.client.auth": "required",
                               "ssl.truststore.location": str(pki.ca)})  # fmt: skip
    keystore = {"ssl.keystore.location": str(pki.clients["ann"])}
    server, error = _handshake(required, _client(pki, **keystore))
    assert error is None
    assert server.getpeercert(binary_form=True)
    assert _handshake(required, _client(pki))[1] is not None  # no certificate: refused
    requested = _server(pki, **{"ssl.client.auth": "requested",
                                "ssl.truststore.location": str(pki.ca)})  # fmt: skip
    server, error = _handshake(requested, _client(pki))
    assert error is None and server.getpeercert(binary_form=True) is None


def test_versions_and_cipher_suites(pki: DevelopmentPki) -> None:
    server = _server(pki, **{"ssl.enabled.protocols": ["TLSv1.2"]})
    end, error = _handshake(server, _client(pki))
    assert error is None and end.version() == "TLSv1.2"
    iana = ["TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"]
    end, error = _handshake(_server(pki, **{"ssl.cipher.suites": iana}), _client(pki))
    assert error is None
    assert (end.version(), end.cipher()[0]) == ("TLSv1.2", "ECDHE-ECDSA-CHACHA20-POLY1305")
    all13 = ["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"]
    end, error = _handshake(_server(pki, **{"ssl.cipher.suites": all13}), _client(pki))
    assert error is None and end.version() == "TLSv1.3"
    # ssl.protocol bounds the version only when ssl.enabled.protocols is empty
    server = _server(pki, **{"ssl.enabled.protocols": [], "ssl.protocol": "TLSv1.2"})
    assert _handshake(server, _client(pki))[0].version() == "TLSv1.2"


def test_hostname_verification(pki: DevelopmentPki, tmp_path: Path) -> None:
    other = write_development_pki(tmp_path, ["elsewhere.example"])
    server = SslEngineFactory({"ssl.keystore.location": str(other.broker)}).server_context()
    strict = SslEngineFactory({"ssl.truststore.location": str(other.ca)}).client_context()
    error = _handshake(server, strict)[1]
    assert isinstance(error, ssl.SSLCertVerificationError)
    lax = SslEngineFactory(
        {"ssl.truststore.location": str(other.ca), "ssl.endpoint.identification.algorithm": ""}
    ).client_context()
    assert _handshake(server, lax)[1] is None


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"ssl.keystore.type": "JKS"}, "JKS is not supported"),
        ({"ssl.truststore.type": "BKS"}, "BKS is not supported"),
        ({"ssl.keystore.password": "x"}, "cannot be specified with PEM"),
        ({"ssl.truststore.password": "x"}, "cannot be specified for PEM"),
        ({"ssl.keystore.key": "k"}, "go together"),
        ({"ssl.keystore.key": "k", "ssl.keystore.certificate.chain": "c",
          "ssl.keystore.location": "/x"}, "cannot be set with"),
        ({"ssl.enabled.protocols": ["TLSv1.1", "TLSv1.3"]}, "consecutive"),
        ({"ssl.protocol": "SSLv3"}, "ssl.protocol"),
        ({"ssl.cipher.suites": ["TLS_RSA_WITH_NULL_SHA"]}, "unknown cipher suite"),
        ({"ssl.cipher.suites": ["NO-SUCH-CIPHER"]}, "OpenSSL knows none"),
        ({"ssl.endpoint.identification.algorithm": "ldap"}, "https or empty"),
    ],
)  # fmt: skip
def test_bad_settings_name_the_key(values: dict[str, Any], message: str) -> None:
    with pytest.raises(SslConfigError, match=message):
        SslEngineFactory(values).client_context()


def test_bad_stores_are_reported(pki: DevelopmentPki, tmp_path: Path) -> None:
    with pytest.raises(SslConfigError, match="needs a keystore"):
        SslEngineFactory({}).server_context()
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate")
    with pytest.raises(SslConfigError, match="cannot load the truststore"):
        SslEngineFactory({"ssl.truststore.location": str(garbage)}).client_context()
    with pytest.raises(SslConfigError, match="cannot load the keystore"):
        SslEngineFactory({"ssl.keystore.location": str(garbage)}).server_context()
    with pytest.raises(SslConfigError, match="no PEM block"):
        SslEngineFactory({"ssl.truststore.certificates": "garbage"}).client_context()
