"""``ssl.principal.mapping.rules``: from a client certificate's distinguished name to a
principal name, with Kafka's rule syntax and semantics.

A TLS client that presents a certificate is ``User:<name>``, where ``<name>`` is its
subject's distinguished name in RFC 2253 form (``CN=alice,OU=eng,O=Example``, most
specific first, as Java's ``X500Principal.getName()`` writes it; see
:func:`distinguished_name`) mapped by the rules:

* ``DEFAULT``: the distinguished name as it is;
* ``RULE:pattern/replacement/`` with an optional ``L`` or ``U`` after the last slash:
  when the Java-syntax regular expression ``pattern`` matches the whole name, the name
  with every match of it replaced by ``replacement`` (``$1`` is the first group; a
  backslash takes the next character literally; a ``$n`` beyond the groups is literal),
  then lower- or upper-cased.

Rules are separated by commas (a comma inside a rule's pattern or replacement is part of
it) and tried in order; the first that matches names the principal. No rule matching is
an error (:class:`NoMatchingRule`): the connection is refused, as Kafka refuses it.
Sans I/O: strings in, strings out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["NoMatchingRule", "SslPrincipalMapper", "distinguished_name"]

DEFAULT_RULES = "DEFAULT"

# One rule: DEFAULT, RULE:pattern/replacement/[LU] (a backslash escapes a slash), or
# anything else (then refused as invalid).
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)


class NoMatchingRule(ValueError):
    """No ``ssl.principal.mapping.rules`` rule applies to a distinguished name."""


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, name: str) -> str | None:
        pattern = self.pattern
        if pattern is None:
            return name
        if pattern.fullmatch(name) is None:
            return None
        result = pattern.sub(lambda m: _expand(self.replacement, m), name)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        return f"RULE:{self.pattern.pattern}/{self.replacement}" + (
            f"/{self.case}" if self.case else ""
        )


def _expand(replacement: str, match: re.Match[str]) -> str:
    """``replacement`` for ``match`` with Java's ``Matcher.appendReplacement`` rules:
    ``$n`` takes as many digits as still name a group, ``${name}`` a named group, a
    backslash the next character as it is; a ``$n`` naming no group stays literal."""
    groups = match.re.groups
    out: list[str] = []
    i, size = 0, len(replacement)
    while i < size:
        c = replacement[i]
        if c == "\\" and i + 1 < size:
            out.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < size and replacement[i + 1].isdigit():
            ref = int(replacement[i + 1])
            if ref > groups:  # not a group: the dollar sign is literal
                out.append(c)
                i += 1
                continue
            j = i + 2
            while j < size and replacement[j].isdigit():
                longer = ref * 10 + int(replacement[j])
                if longer > groups:
                    break
                ref, j = longer, j + 1
            out.append(match.group(ref) or "")
            i = j
        elif c == "$" and replacement.startswith("{", i + 1) and "}" in replacement[i + 2 :]:
            end = replacement.index("}", i + 2)
            out.append(match.group(replacement[i + 2 : end]) or "")
            i = end + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _split(rules: str) -> list[str]:
    text = rules.strip()
    out: list[str] = []
    pos = 0
    while pos <= len(text):
        m = _SPLITTER.match(text, pos)
        if m is None:
            break
        out.append(m.group(1))
        if m.end() == pos:  # the empty match at the end
            break
        pos = m.end()
    return out


def _parse(rule: str) -> _Rule | None:
    m = _PARSER.match(rule)
    if m is None or m.end() != len(rule):
        unmatched = rule[m.end() :] if m is not None else rule
        raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: `{unmatched}`")
    if m.group(1) is not None:
        return _Rule(None)
    if m.group(2) is not None:
        try:
            pattern = re.compile(m.group(2))
        except re.error as exc:
            raise ValueError(f"Invalid rule: `{rule}`: {exc}") from None
        return _Rule(pattern, m.group(3), m.group(4))
    if rule.strip():
        raise ValueError(f"Invalid rule: {rule}")
    return None  # empty rules are ignored


class SslPrincipalMapper:
    """The parsed ``ssl.principal.mapping.rules``; :meth:`name` maps a distinguished name."""

    __slots__ = ("rules",)

    def __init__(self, rules: str | None = DEFAULT_RULES) -> None:
        """ValueError for a rule that does not parse (``Invalid rule: ...``)."""
        parsed = [_parse(r) for r in _split(rules if rules is not None else DEFAULT_RULES)]
        self.rules: tuple[_Rule, ...] = tuple(r for r in parsed if r is not None)

    def name(self, distinguished_name: str) -> str:
        """The principal name for ``distinguished_name``; NoMatchingRule if no rule
        applies."""
        for rule in self.rules:
            result = rule.apply(distinguished_name)
            if result is not None:
                return result
        raise NoMatchingRule(f"No rules apply to {distinguished_name}, rules {self}")

    def __str__(self) -> str:
        return "[" + ", ".join(str(r) for r in self.rules) + "]"


def distinguished_name(certificate_der: bytes) -> str:
    """A DER certificate's subject in RFC 2253 form, as Java's ``X500Principal.getName()``
    writes it (the ``cryptography`` package's RFC 4514 string, which names the same
    attribute types and writes others as ``OID=#hex``)."""
    from cryptography import x509

    return x509.load_der_x509_certificate(certificate_der).subject.rfc4514_string()
