"""A development certificate authority: a CA, broker and client certificates as PEM files.

For trying TLS listeners and client authentication on one machine, and for the tests:
:func:`write_development_pki` writes, into one directory,

* ``ca.pem`` (the CA's certificate: the truststore of brokers and clients) and
  ``ca-key.pem`` (its private key, kept to sign more certificates later);
* ``broker.pem``: the broker's private key followed by its certificate and the CA's
  (Kafka's PEM keystore layout, ``ssl.keystore.type=PEM``), valid for TLS servers and
  clients (brokers are each other's clients) with the given host names and addresses as
  subject alternative names;
* ``client-<name>.pem`` per client, the same layout, with the subject ``CN=<name>``
  (the principal a broker derives from it: ``User:CN=<name>`` by default);

optionally with the private keys encrypted under a password (``ssl.key.password``).
The keys are EC P-256, the certificates valid for ``days`` days. All cryptography is the
``cryptography`` package's; nothing here is fit for production use.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertificateAuthority", "DevelopmentPki", "write_development_pki"]

DEFAULT_DAYS = 365
_PrivateKey = ec.EllipticCurvePrivateKey


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _alt_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


_CA_KEY_USAGE = x509.KeyUsage(
    digital_signature=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=True,
    crl_sign=True,
    encipher_only=False,
    decipher_only=False,
)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True)
class CertificateAuthority:
    """A CA's key and self-signed certificate, which signs broker and client certificates."""

    key: _PrivateKey
    certificate: x509.Certificate

    @classmethod
    def create(
        cls, common_name: str = "Sluice development CA", days: int = DEFAULT_DAYS
    ) -> CertificateAuthority:
        key = ec.generate_private_key(ec.SECP256R1())
        name = _name(common_name, "Sluice")
        now = _now()
        certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_CA_KEY_USAGE, critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .sign(key, hashes.SHA256())
        )
        return cls(key, certificate)

    @classmethod
    def load(cls, certificate_pem: bytes, key_pem: bytes) -> CertificateAuthority:
        key = serialization.load_pem_private_key(key_pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError("the CA key is not the EC key this tool writes")
        return cls(key, x509.load_pem_x509_certificate(certificate_pem))

    def issue(
        self,
        subject: x509.Name,
        hosts: Sequence[str] = (),
        *,
        server: bool = False,
        days: int = DEFAULT_DAYS,
    ) -> tuple[_PrivateKey, x509.Certificate]:
        """A new key and a certificate for ``subject``: a client certificate, and also a
        server one with ``server`` (its ``hosts`` as subject alternative names)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = _now()
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
        if server:
            usages.insert(0, ExtendedKeyUsageOID.SERVER_AUTH)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), False
            )
        )
        if hosts:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([_alt_name(h) for h in hosts]), critical=False
            )
        return key, builder.sign(self.key, hashes.SHA256())

    def keystore_pem(
        self, key: _PrivateKey, certificate: x509.Certificate, password: str | None = None
    ) -> bytes:
        """Kafka's PEM keystore: the private key (PKCS#8, encrypted under ``password`` if
        given), then the certificate chain up to this CA."""
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password.encode())
            if password
            else serialization.NoEncryption()
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )
        return key_pem + _pem(certificate) + _pem(self.certificate)


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


@dataclass(frozen=True)
class DevelopmentPki:
    """The files :func:`write_development_pki` wrote."""

    ca: Path
    ca_key: Path
    broker: Path
    clients: dict[str, Path]


def write_development_pki(
    directory: Path,
    broker_hosts: Iterable[str] = ("localhost", "127.0.0.1"),
    clients: Iterable[str] = (),
    *,
    key_password: str | None = None,
    days: int = DEFAULT_DAYS,
    broker_name: str = "broker",
) -> DevelopmentPki:
    """Write a CA (reusing ``ca.pem``/``ca-key.pem`` if the directory has them), a broker
    keystore and one keystore per client into ``directory`` (see the module docstring).
    Private keys are written readable by their owner only."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_path, ca_key_path = directory / "ca.pem", directory / "ca-key.pem"
    if ca_path.exists() and ca_key_path.exists():
        ca = CertificateAuthority.load(ca_path.read_bytes(), ca_key_path.read_bytes())
    else:
        ca = CertificateAuthority.create(days=days)
        _write(ca_key_path, ca.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ), private=True)  # fmt: skip
        _write(ca_path, _pem(ca.certificate))
    hosts = list(broker_hosts)
    key, certificate = ca.issue(_name(broker_name, "Sluice"), hosts, server=True, days=days)
    broker_path = directory / f"{broker_name}.pem"
    _write(broker_path, ca.keystore_pem(key, certificate, key_password), private=True)
    written: dict[str, Path] = {}
    for client in clients:
        key, certificate = ca.issue(_name(client), days=days)
        path = directory / f"client-{client}.pem"
        _write(path, ca.keystore_pem(key, certificate, key_password), private=True)
        written[client] = path
    return DevelopmentPki(ca_path, ca_key_path, broker_path, written)


def _write(path: Path, data: bytes, *, private: bool = False) -> None:
    path.unlink(missing_ok=True)
    path.touch(mode=0o600 if private else 0o644)
    path.write_bytes(data)
