"""ssl.principal.mapping.rules: Kafka's rule syntax, splitting and replacement semantics."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from hypothesis import given
from hypothesis import strategies as st

from sluice.security.certificates import write_development_pki
from sluice.security.ssl_principal_mapper import (
    NoMatchingRule,
    SslPrincipalMapper,
    distinguished_name,
)


def test_default_keeps_the_distinguished_name() -> None:
    assert SslPrincipalMapper().name("CN=ops,O=Example") == "CN=ops,O=Example"
    assert SslPrincipalMapper(None).name("CN=ops") == "CN=ops"


def test_rules_are_tried_in_order_and_the_first_match_names() -> None:
    mapper = SslPrincipalMapper(
        "RULE:^CN=(.*?),OU=Robots.*$/$1/L, "
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),C=(.*?)$/$1@$2/U, "
        "RULE:^.*[Cc][Nn]=([a-z0-9.]*).*$/svc-$1/, "
        "DEFAULT"
    )
    assert mapper.name("CN=Builder,OU=Robots,O=Example") == "builder"
    assert mapper.name("CN=ann,OU=web,O=Example,C=NL") == "ANN@WEB"
    assert mapper.name("OU=x,cn=ingest.1,O=y") == "svc-ingest.1"
    assert mapper.name("O=Nobody,C=NL") == "O=Nobody,C=NL"


def test_no_matching_rule_is_an_error() -> None:
    mapper = SslPrincipalMapper("RULE:^CN=(.*)$/$1/")
    with pytest.raises(NoMatchingRule, match="No rules apply to O=x"):
        mapper.name("O=x")


@pytest.mark.parametrize(
    ("rules", "shown"),
    [
        ("", "[]"),
        ("DEFAULT", "[DEFAULT]"),
        ("RULE://", "[RULE:/]"),
        ("RULE:/.*/L", "[RULE:/.*/L]"),
        ("  RULE:// ,  DEFAULT  ", "[RULE:/, DEFAULT]"),
        ("  RULE:  /   /U   ,DEFAULT  ", "[RULE:  /   /U, DEFAULT]"),
        (",  , ,,", "[]"),  # empty rules are ignored
        (",,RULE://,,,DEFAULT,,", "[RULE:/, DEFAULT]"),
        # a comma inside a rule belongs to it; a backslash escapes a slash
        ("RULE:a,b/c,d/,DEFAULT", "[RULE:a,b/c,d, DEFAULT]"),
        ("RULE:x\\/y/\\//L", "[RULE:x\\/y/\\//L]"),
    ],
)
def test_rules_split_as_kafka_splits_them(rules: str, shown: str) -> None:
    assert str(SslPrincipalMapper(rules)) == shown


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "RULE:^CN=(.*)$/$1",
        "rule:^CN=(.*)$/$1/",
        "RULE:^CN=(.*)$/$1/L/U",
        "RULE:^CN=(.*)$/L",
        "RULE:^CN=(.*)$/$1/LU",
        "RULE:^CN=(.*$/$1/",  # not a regular expression
    ],
)
def test_invalid_rules_are_refused(rules: str) -> None:
    with pytest.raises(ValueError, match="Invalid rule"):
        SslPrincipalMapper(rules)


def test_replacement_follows_java_rules() -> None:
    # $n beyond the groups stays literal; $12 with one group is group 1 then "2";
    # a backslash takes the next character as it is; ${name} names a group
    assert SslPrincipalMapper("RULE:^CN=(\\w+)$/$1-$4/").name("CN=ann") == "ann-$4"
    assert SslPrincipalMapper("RULE:^CN=(\\w+)$/$12/").name("CN=ann") == "ann2"
    assert SslPrincipalMapper("RULE:^CN=(\\w+)$/\\$1=$1/").name("CN=ann") == "$1=ann"
    assert SslPrincipalMapper("RULE:^CN=(?P<u>\\w+)$/${u}!/").name("CN=ann") == "ann!"
    # an escaped comma inside a common name, kept by a rule that allows it
    mapper = SslPrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Doe\\, Jane,OU=x") == "Doe\\, Jane"


@given(st.text(alphabet="abcXYZ019=,. ", max_size=30))
def test_default_and_identity_rules_map_any_name_to_itself(name: str) -> None:
    assert SslPrincipalMapper("DEFAULT").name(name) == name
    assert SslPrincipalMapper("RULE:^(.*)$/$1/, DEFAULT").name(name) == name


def test_the_distinguished_name_is_rfc_2253_most_specific_first(tmp_path: Path) -> None:
    pki = write_development_pki(tmp_path, clients=["alice"])
    text = pki.clients["alice"].read_bytes()
    cert = x509.load_pem_x509_certificates(text)[0]
    der = cert.public_bytes(serialization.Encoding.DER)
    assert distinguished_name(der) == "CN=alice"
    broker = x509.load_pem_x509_certificates(pki.broker.read_bytes())[0]
    assert distinguished_name(broker.public_bytes(serialization.Encoding.DER)) == (
        "CN=broker,O=Sluice"
    )
