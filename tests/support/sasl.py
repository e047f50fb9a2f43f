"""SASL test helpers: JAAS texts, a JWKS with a key to sign JWTs, unsecured tokens, and
SCRAM users created through the admin API."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from sluice.security.sasl.oauthbearer import unsecured_jws

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
JWKS_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


def plain_jaas(users: dict[str, str], username: str | None = None) -> str:
    """PlainLoginModule with ``user_<name>`` entries (and the broker's own login)."""
    options = " ".join(f'user_{u}="{p}"' for u, p in users.items())
    if username is not None:
        options = f'username="{username}" password="{users[username]}" {options}'
    return f"{PLAIN_MODULE} required {options};"


def unsecured_token(sub: str, lifetime_s: float = 3600, **claims: Any) -> str:
    now = time.time()
    return unsecured_jws({"sub": sub, "iat": now, "exp": now + lifetime_s, **claims})


class Jwks:
    """An RSA key in a JWKS file, and signed JWTs."""

    def __init__(self, directory: Path, kid: str = "test-key") -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = kid
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        jwk.update({"kid": kid, "alg": "RS256", "use": "sig"})
        self.path = directory / "jwks.json"
        self.path.write_text(json.dumps({"keys": [jwk]}))

    @property
    def url(self) -> str:
        return f"file:{self.path}"

    def token(self, sub: str, lifetime_s: float = 3600, **claims: Any) -> str:
        now = int(time.time())
        payload = {"sub": sub, "iat": now, "exp": now + lifetime_s, **claims}
        return jwt.encode(payload, self.key, algorithm="RS256", headers={"kid": self.kid})


def scram_login(bootstrap: str, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> bool:
    """One SCRAM exchange on a new connection to exactly ``bootstrap`` (SaslHandshake v1,
    SaslAuthenticate v2, scramp's client): whether it succeeded."""
    import scramp
    from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

    from support.wire import RawClient

    client = RawClient(bootstrap)
    try:
        handshake: Any = client.request(SaslHandshakeRequest(mechanism=mechanism))
        if handshake.error_code != 0:
            return False
        scram = scramp.ScramClient([mechanism], user, password)
        first: Any = client.request(
            SaslAuthenticateRequest(auth_bytes=scram.get_client_first().encode())
        )
        if first.error_code != 0:
            return False
        scram.set_server_first(first.auth_bytes.decode())
        final: Any = client.request(
            SaslAuthenticateRequest(auth_bytes=scram.get_client_final().encode())
        )
        if final.error_code != 0:
            return False
        scram.set_server_final(final.auth_bytes.decode())
        return True
    finally:
        client.close()


def alter_scram_request(
    user: str, password: str, mechanism: int = 1, iterations: int = 4096
) -> Any:
    """An AlterUserScramCredentials v0 request upserting ``user`` (1: SCRAM-SHA-256)."""
    import os

    from kio.schema.alter_user_scram_credentials.v0.request import (
        AlterUserScramCredentialsRequest,
        ScramCredentialUpsertion,
    )
    from kio.static.primitive import i8, i32

    from sluice.security.sasl.scram import salted_password

    name = "SCRAM-SHA-256" if mechanism == 1 else "SCRAM-SHA-512"
    salt = os.urandom(16)
    upsertion = ScramCredentialUpsertion(
        name=user, mechanism=i8(mechanism), iterations=i32(iterations), salt=salt,
        salted_password=salted_password(name, password, salt, iterations),
    )  # fmt: skip
    return AlterUserScramCredentialsRequest(deletions=(), upsertions=(upsertion,))
