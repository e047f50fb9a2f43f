from __future__ import annotations

import pytest

from sluice.security import ANONYMOUS, DEFAULT_SESSION, KafkaPrincipal


def test_a_principal_reads_and_writes_as_kafka_does() -> None:
    alice = KafkaPrincipal.parse("User:alice")
    assert alice == KafkaPrincipal("User", "alice")
    assert str(alice) == "User:alice"
    # the name may itself hold colons (a distinguished name, a mapped SASL name)
    assert KafkaPrincipal.parse("User:CN=a:b").name == "CN=a:b"
    assert str(ANONYMOUS) == "User:ANONYMOUS"
    assert DEFAULT_SESSION.principal is ANONYMOUS


@pytest.mark.parametrize("text", ["alice", ":alice", "User:", ""])
def test_a_principal_without_a_type_or_name_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="Type:name"):
        KafkaPrincipal.parse(text)
