"""The sans-I/O SASL parts: JAAS parsing, the mechanisms' servers against real clients'
messages (scramp's SCRAM client), Kafka's credential format, the AlterUserScramCredentials
rules, the token validators, and the per-connection authenticator's states."""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any

import pytest
import scramp
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v0.request import SaslAuthenticateRequest as AuthV0
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest as AuthV2
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as HandshakeV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest as HandshakeV1

from sluice.base.clock import ManualClock
from sluice.protocol import decode_request, encode_request
from sluice.security import KafkaPrincipal
from sluice.security.sasl import SaslAuthenticationException, SaslException
from sluice.security.sasl.authenticator import (
    SaslServerAuthenticator,
    SaslServerConfig,
    SaslState,
    StepKind,
)
from sluice.security.sasl.credential_store import (
    Deletion,
    FileScramCredentialStore,
    ScramCredentialCache,
    Upsertion,
    describe,
    plan_alterations,
)
from sluice.security.sasl.jaas import JaasConfigError, parse_jaas_config
from sluice.security.sasl.oauthbearer import (
    JwksValidator,
    OAuthBearerSaslServer,
    TokenValidationError,
    UnsecuredJwsValidator,
    load_jwks,
    unsecured_jws,
)
from sluice.security.sasl.plain import PlainSaslServer
from sluice.security.sasl.scram import ScramCredential, ScramSaslServer, salted_password
from sluice.server.apis import registry
from support.sasl import Jwks

pytestmark = pytest.mark.unit


# -- JAAS ----------------------------------------------------------------------------------


def test_jaas_config_is_parsed_as_kafka_writes_it() -> None:
    jaas = parse_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '  username="admin" password="admin-secret" user_admin="admin-secret" '
        "user_alice='alice secret' unsecuredLoginStringClaim_sub=bare;"
    )
    assert jaas.login_module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert jaas.control_flag == "required"
    assert jaas.options["username"] == "admin"
    assert jaas.options["unsecuredLoginStringClaim_sub"] == "bare"
    assert jaas.users == {"admin": "admin-secret", "alice": "alice secret"}


@pytest.mark.parametrize(
    "text",
    ["", "Module;", "Module sometimes;", 'Module required a="b"', 'Module required a "b";',
     'Module required a="b"; Other required;', 'Module required a="b'],
)  # fmt: skip
def test_malformed_jaas_configs_are_refused(text: str) -> None:
    with pytest.raises(JaasConfigError):
        parse_jaas_config(text)


# -- PLAIN ---------------------------------------------------------------------------------


def test_plain_checks_the_password_with_kafkas_messages() -> None:
    users = {"alice": "secret"}
    server = PlainSaslServer(users)
    assert server.evaluate_response(b"\x00alice\x00secret") == b""
    assert server.complete and server.authorization_id == "alice"
    for token, message in [
        (b"\x00alice\x00wrong", "Authentication failed: Invalid username or password"),
        (b"\x00bob\x00secret", "Authentication failed: Invalid username or password"),
        (b"\x00\x00secret", "Authentication failed: username not specified"),
        (b"\x00alice\x00", "Authentication failed: password not specified"),
        (b"alice\x00secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
        (b"bob\x00alice\x00secret", "authorization id that is different from username"),
    ]:
        with pytest.raises(SaslAuthenticationException, match=message):
            PlainSaslServer(users).evaluate_response(token)


# -- SCRAM ---------------------------------------------------------------------------------


def _scram_exchange(
    mechanism: str, stored: ScramCredential | None, password: str
) -> ScramSaslServer:
    server = ScramSaslServer(mechanism, lambda user: stored if user == "alice" else None)
    client = scramp.ScramClient([mechanism], "alice", password)
    client.set_server_first(server.evaluate_response(client.get_client_first().encode()).decode())
    final = server.evaluate_response(client.get_client_final().encode())
    client.set_server_final(final.decode())  # the client checks the server's signature
    return server


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange_with_a_real_client(mechanism: str) -> None:
    stored = ScramCredential.from_password(mechanism, "pw", iterations=4096)
    server = _scram_exchange(mechanism, stored, "pw")
    assert server.complete and server.authorization_id == "alice"
    with pytest.raises(SaslException):
        _scram_exchange(mechanism, stored, "wrong")
    with pytest.raises(SaslException, match="Invalid user credentials"):
        _scram_exchange(mechanism, None, "pw")


def test_scram_credentials_in_kafkas_string_form() -> None:
    # RFC 7677's SCRAM-SHA-256 test vector: user "user", password "pencil"
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = ScramCredential.from_password("SCRAM-SHA-256", "pencil", 4096, salt)
    salted = salted_password("SCRAM-SHA-256", "pencil", salt, 4096)
    assert credential == ScramCredential.from_salted_password("SCRAM-SHA-256", salt, salted, 4096)
    text = credential.to_string()
    assert text.startswith("salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key=") and text.endswith(
        ",iterations=4096"
    )
    assert ScramCredential.from_string(text) == credential
    # the server signature of RFC 7677's exchange is made with this ServerKey
    client = scramp.ScramClient(["SCRAM-SHA-256"], "user", "pencil", c_nonce="rOprNGfwEbeRWgbNEkqO")
    server = ScramSaslServer("SCRAM-SHA-256", lambda user: credential)
    server._server.s_nonce = scramp.core.Nonce("%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = server.evaluate_response(client.get_client_first().encode()).decode()
    assert first == (
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    client.set_server_first(first)
    final = server.evaluate_response(client.get_client_final().encode()).decode()
    assert final == "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


@given(
    salt=st.binary(min_size=1, max_size=64), stored=st.binary(min_size=1, max_size=64),
    server=st.binary(min_size=1, max_size=64), iterations=st.integers(1, 1 << 30),
)  # fmt: skip
def test_credential_strings_round_trip(
    salt: bytes, stored: bytes, server: bytes, iterations: int
) -> None:
    credential = ScramCredential(salt, stored, server, iterations)
    assert ScramCredential.from_string(credential.to_string()) == credential


@pytest.mark.parametrize(
    "text",
    ["", "salt=AA==,stored_key=AA==,server_key=AA==", "salt=AA==,stored_key=AA==,"
     "server_key=AA==,iterations=x", "salt=!!,stored_key=AA==,server_key=AA==,iterations=1",
     "salt=AA==,stored_key=AA==,server_key=AA==,iterations=1,extra=1"],
)  # fmt: skip
def test_malformed_credential_strings(text: str) -> None:
    with pytest.raises(ValueError, match="Credentials not valid"):
        ScramCredential.from_string(text)


def _upsert(name: str, mechanism: int = 1, iterations: int = 4096) -> Upsertion:
    salt = b"salt"
    return Upsertion(name, mechanism, iterations, salt, salted_password(
        "SCRAM-SHA-256" if mechanism != 2 else "SCRAM-SHA-512", "pw", salt, 4096
    ))  # fmt: skip


def test_alterations_follow_kafkas_rules() -> None:
    cache = ScramCredentialCache()
    cache.set_user("bob", {"SCRAM-SHA-256": ScramCredential.from_password("SCRAM-SHA-256", "x")})
    failed, changes = plan_alterations(
        [_upsert(""), _upsert("u1", mechanism=0), _upsert("u2", iterations=100),
         _upsert("u3", iterations=20000), _upsert("dup"), _upsert("dup"), _upsert("ok", 2)],
        [Deletion("bob", 1), Deletion("gone", 1), Deletion("ok", 1)],
        cache,
    )  # fmt: skip
    assert {(r.user, r.error_code, r.error_message) for r in failed} == {
        ("", ErrorCode.unacceptable_credential, "Username must not be empty"),
        ("u1", ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
        ("u2", ErrorCode.unacceptable_credential, "Too few iterations"),
        ("u3", ErrorCode.unacceptable_credential, "Too many iterations"),
        ("dup", ErrorCode.duplicate_resource,
         "A user credential cannot be altered twice in the same request"),
        ("gone", ErrorCode.resource_not_found,
         "Attempt to delete a user credential that does not exist"),
        ("ok", ErrorCode.resource_not_found,
         "Attempt to delete a user credential that does not exist"),
    }  # fmt: skip
    assert changes == {"bob": {"SCRAM-SHA-256": None}}


def test_describe_follows_kafkas_rules() -> None:
    cache = ScramCredentialCache()
    cache.set_user("bob", {"SCRAM-SHA-512": ScramCredential(b"s", b"k", b"v", 8192)})
    assert [(r.user, r.credentials) for r in describe(cache, None)] == [
        ("bob", (("SCRAM-SHA-512", 8192),))
    ]
    results = describe(cache, ["bob", "x", "x", ""])
    assert [(r.user, r.error_code) for r in results] == [
        ("bob", ErrorCode.none), ("x", ErrorCode.duplicate_resource),
        ("", ErrorCode.resource_not_found),
    ]  # fmt: skip


def test_the_file_store_is_durable_and_keeps_kafkas_form(tmp_path: Path) -> None:
    store = FileScramCredentialStore(tmp_path)
    credential = ScramCredential.from_password("SCRAM-SHA-256", "pw")
    store.persist({"alice": {"SCRAM-SHA-256": credential}, "bob": {"SCRAM-SHA-512": None}})
    again = FileScramCredentialStore(tmp_path)
    assert again.cache.credential("SCRAM-SHA-256", "alice") == credential
    assert credential.to_string() in (tmp_path / "__sluice_scram_credentials.json").read_text()
    again.persist({"alice": {"SCRAM-SHA-256": None}})
    assert FileScramCredentialStore(tmp_path).cache.users() == {}
    assert not list(tmp_path.glob("*.tmp"))


# -- OAUTHBEARER ---------------------------------------------------------------------------


def _message(token: str, authzid: str = "") -> bytes:
    a = f"a={authzid}" if authzid else ""
    return f"n,{a},\x01auth=Bearer {token}\x01\x01".encode()


def test_unsecured_tokens_are_checked_like_kafkas_validator() -> None:
    clock = ManualClock(0)
    clock.advance(1_000_000)
    now = clock.milliseconds() / 1000
    validator = UnsecuredJwsValidator({"unsecuredValidatorRequiredScope": "write"}, clock)
    token = unsecured_jws({"sub": "alice", "exp": now + 60, "scope": "read write"})
    server = OAuthBearerSaslServer(validator)
    assert server.evaluate_response(_message(token)) == b""
    assert server.authorization_id == "alice"
    assert server.credential_expiration_ms == int((now + 60) * 1000)
    for bad, status in [
        (unsecured_jws({"sub": "alice", "exp": now - 1, "scope": "write"}), "invalid_token"),
        (unsecured_jws({"exp": now + 60, "scope": "write"}), "invalid_token"),
        (unsecured_jws({"sub": "alice", "scope": "write"}), "invalid_token"),
        (unsecured_jws({"sub": "alice", "exp": now + 60}), "insufficient_scope"),
        ("abc.def.ghi", "invalid_token"),
    ]:
        server = OAuthBearerSaslServer(validator)
        challenge = server.evaluate_response(_message(bad))
        assert f'"status":"{status}"' in challenge.decode()
        with pytest.raises(SaslAuthenticationException, match=status):
            server.evaluate_response(b"\x01")
    with pytest.raises(SaslAuthenticationException, match="authorization id"):
        OAuthBearerSaslServer(validator).evaluate_response(_message(token, authzid="bob"))
    with pytest.raises(SaslException):
        OAuthBearerSaslServer(validator).evaluate_response(b"n,,\x01auth=Basic abc\x01\x01")


def test_signed_tokens_against_a_jwks(tmp_path: Path) -> None:
    jwks = Jwks(tmp_path)
    (tmp_path / "other").mkdir()
    other = Jwks(tmp_path / "other")
    validator = JwksValidator(
        load_jwks(jwks.url), ManualClock(int(time.time() * 1000)),
        expected_audience=["kafka"], expected_issuer="iss",
    )  # fmt: skip
    token = validator.validate(jwks.token("alice", aud="kafka", iss="iss"))
    assert token.principal_name == "alice"
    for bad in (
        jwks.token("alice", aud="other", iss="iss"),
        jwks.token("alice", aud="kafka", iss="other"),
        jwks.token("alice", lifetime_s=-100, aud="kafka", iss="iss"),
        other.token("alice", aud="kafka", iss="iss"),  # another key, same kid
        unsecured_jws({"sub": "alice", "exp": time.time() + 60}),
    ):
        with pytest.raises(TokenValidationError):
            validator.validate(bad)


# -- the authenticator ---------------------------------------------------------------------

_VERSIONS = registry().versions


def _request(body: Any, correlation_id: int = 1) -> Any:
    return decode_request(encode_request(correlation_id, body)[4:], _VERSIONS)


def _authenticator(max_reauth_ms: int = 0) -> tuple[SaslServerAuthenticator, ManualClock]:
    clock = ManualClock(0)
    config = SaslServerConfig(
        ["PLAIN", "OAUTHBEARER"],
        {"PLAIN": lambda: PlainSaslServer({"alice": "pw", "bob": "pw"}),
         "OAUTHBEARER": lambda: OAuthBearerSaslServer(UnsecuredJwsValidator({}, clock))},
        {"PLAIN": max_reauth_ms, "OAUTHBEARER": max_reauth_ms},
    )  # fmt: skip
    return SaslServerAuthenticator(config, clock), clock


def _authenticate(auth: SaslServerAuthenticator, user: str = "alice", version: int = 2) -> Any:
    assert auth.receive(_request(HandshakeV1(mechanism="PLAIN"))).kind is StepKind.RESPOND
    body = (AuthV2 if version == 2 else AuthV0)(auth_bytes=f"\x00{user}\x00pw".encode())
    return auth.receive(_request(body))


def test_the_states_of_an_authentication() -> None:
    auth, _ = _authenticator()
    assert auth.state is SaslState.INITIAL_REQUEST
    assert (
        auth.receive(
            _request(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        ).kind
        is StepKind.SERVE
    )
    assert auth.state is SaslState.HANDSHAKE_REQUEST
    step = _authenticate(auth)
    assert step.kind is StepKind.AUTHENTICATED
    assert step.principal == KafkaPrincipal("User", "alice")
    assert step.response.error_code == ErrorCode.none
    assert auth.complete and not auth.session_expired()


def test_an_unsupported_mechanism_lists_the_enabled_ones() -> None:
    auth, _ = _authenticator()
    step = auth.receive(_request(HandshakeV1(mechanism="SCRAM-SHA-256")))
    assert step.kind is StepKind.FAILED
    assert step.response.error_code == ErrorCode.unsupported_sasl_mechanism
    assert step.response.mechanisms == ("PLAIN", "OAUTHBEARER")


@pytest.mark.parametrize("first", [True, False])
def test_other_requests_before_authentication_fail_without_an_answer(first: bool) -> None:
    auth, _ = _authenticator()
    if not first:
        auth.receive(_request(HandshakeV1(mechanism="PLAIN")))
    step = auth.receive(
        _request(MetadataRequest(topics=None, include_topic_authorized_operations=False))
    )
    assert step.kind is StepKind.FAILED and step.response is None
    assert "Unexpected Kafka request of type METADATA" in step.message
    assert auth.state is SaslState.FAILED


def test_a_second_api_versions_fails() -> None:
    auth, _ = _authenticator()
    auth.receive(
        _request(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    )
    assert (
        auth.receive(
            _request(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        ).kind
        is StepKind.FAILED
    )


def test_a_failed_password_answers_kafkas_message() -> None:
    auth, _ = _authenticator()
    auth.receive(_request(HandshakeV1(mechanism="PLAIN")))
    step = auth.receive(_request(AuthV2(auth_bytes=b"\x00alice\x00nope")))
    assert step.kind is StepKind.FAILED
    assert step.response.error_code == ErrorCode.sasl_authentication_failed
    assert step.response.error_message == "Authentication failed: Invalid username or password"


def test_raw_tokens_after_a_v0_handshake() -> None:
    auth, _ = _authenticator()
    assert auth.receive(_request(HandshakeV0(mechanism="PLAIN"))).kind is StepKind.RESPOND
    assert auth.raw_tokens
    step = auth.receive_token(b"\x00alice\x00pw")
    assert step.kind is StepKind.AUTHENTICATED and step.raw == b""
    assert not auth.raw_tokens
    auth2, _ = _authenticator()
    auth2.receive(_request(HandshakeV0(mechanism="PLAIN")))
    failed = auth2.receive_token(b"\x00alice\x00nope")
    assert failed.kind is StepKind.FAILED and failed.response is None and failed.raw is None


def test_session_lifetime_and_reauthentication() -> None:
    auth, clock = _authenticator(max_reauth_ms=10_000)
    step = _authenticate(auth)
    assert step.response.session_lifetime.total_seconds() == 10
    clock.advance(9_999)
    assert not auth.session_expired()
    clock.advance(1)
    assert auth.session_expired()
    # the client used SaslAuthenticate v2: it may re-authenticate, as the same principal
    assert auth.begin_reauthentication()
    assert _authenticate(auth).kind is StepKind.AUTHENTICATED
    assert not auth.session_expired()
    assert auth.begin_reauthentication()
    step = _authenticate(auth, user="bob")
    assert step.kind is StepKind.FAILED
    assert "Cannot change principals during re-authentication" in step.response.error_message


def test_a_v0_client_cannot_reauthenticate_and_expires() -> None:
    auth, clock = _authenticator(max_reauth_ms=1000)
    assert _authenticate(auth, version=0).kind is StepKind.AUTHENTICATED
    assert not auth.begin_reauthentication()
    clock.advance(1000)
    assert auth.session_expired()


def test_reauthentication_keeps_the_mechanism() -> None:
    auth, _ = _authenticator(max_reauth_ms=1000)
    _authenticate(auth)
    assert auth.begin_reauthentication()
    assert auth.receive(_request(HandshakeV1(mechanism="OAUTHBEARER"))).kind is StepKind.RESPOND
    step = auth.receive(_request(AuthV2(auth_bytes=b"x")))
    assert step.kind is StepKind.FAILED
    assert "not supported for re-authentication of mechanism 'PLAIN'" in step.message


def test_a_token_bounds_the_session() -> None:
    auth, clock = _authenticator(max_reauth_ms=60_000)
    clock.advance(5_000_000)
    now = clock.milliseconds() / 1000
    auth.receive(_request(HandshakeV1(mechanism="OAUTHBEARER")))
    token = unsecured_jws({"sub": "carol", "exp": now + 20})
    step = auth.receive(_request(AuthV2(auth_bytes=_message(token))))
    assert step.kind is StepKind.AUTHENTICATED
    assert step.response.session_lifetime.total_seconds() == 20


def test_broker_sasl_settings_are_checked() -> None:
    from sluice.config import BrokerConfig, ConfigError
    from sluice.security.sasl.listener_config import sasl_listener_settings

    with pytest.raises(ConfigError, match="must be prefixed with a listener and a mechanism"):
        BrokerConfig({"sasl.jaas.config": "x required;"})
    base = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN"}
    with pytest.raises(ConfigError, match=r"plain\.sasl\.jaas\.config must be set"):
        sasl_listener_settings(BrokerConfig(base), "SASL_PLAINTEXT")
    wrong_module = {
        **base,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        ),
    }
    with pytest.raises(ConfigError, match="PLAIN takes"):
        sasl_listener_settings(BrokerConfig(wrong_module), "SASL_PLAINTEXT")
    with pytest.raises(ConfigError, match="GSSAPI is not supported"):
        sasl_listener_settings(
            BrokerConfig({**base, "sasl.enabled.mechanisms": "GSSAPI"}), "SASL_PLAINTEXT"
        )
    jwks = {
        **base, "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
        ),
        "sasl.oauthbearer.jwks.endpoint.url": "file:/nonexistent/jwks.json",
    }  # fmt: skip
    with pytest.raises(ConfigError, match="cannot read the JWKS"):
        sasl_listener_settings(BrokerConfig(jwks), "SASL_PLAINTEXT")
    per_listener = {
        **base, "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms": "5000",
        "connections.max.reauth.ms": "60000",
    }  # fmt: skip
    settings = sasl_listener_settings(BrokerConfig(per_listener), "SASL_PLAINTEXT")
    assert settings.enabled_mechanisms == ("SCRAM-SHA-512", "OAUTHBEARER")
    assert settings.max_reauth_ms == {"SCRAM-SHA-512": 60000, "OAUTHBEARER": 5000}
