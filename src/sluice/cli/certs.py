"""``sluice certs``: a development CA with broker and client certificates, as PEM files.

    sluice certs --dir ./pki --broker-host localhost --broker-host 127.0.0.1 \\
        --client alice --client bob [--key-password secret]

Writes ``ca.pem`` and ``ca-key.pem`` (reused when the directory already has them, so
more clients can be added later), ``broker.pem`` (key and certificate chain, valid for
the ``--broker-host`` names and addresses) and ``client-<name>.pem`` per ``--client``
(subject ``CN=<name>``), then prints the broker properties and a client properties file
that use them. For development and tests only (:mod:`sluice.security.certificates`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sluice.cli.arguments import ToolError, tool_command

__all__ = ["add_parser", "run"]

PROG = "sluice certs"

_DESCRIPTION = __doc__.split("\n\n", 1)[1] if __doc__ else None


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "certs",
        help="make a development CA and broker and client certificates (PEM)",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--dir", required=True, type=Path, help="where to write the files")
    parser.add_argument(
        "--broker-host",
        action="append",
        default=None,
        metavar="HOST",
        help="a host name or address the broker certificate is valid for (repeatable; "
        "default: localhost and 127.0.0.1)",
    )
    parser.add_argument(
        "--broker-name", default="broker", help="the broker certificate's CN and file name"
    )
    parser.add_argument(
        "--client",
        action="append",
        default=[],
        metavar="NAME",
        help="a client certificate with the subject CN=NAME (repeatable)",
    )
    parser.add_argument(
        "--key-password",
        default=None,
        help="encrypt the private keys with this password (ssl.key.password)",
    )
    parser.add_argument("--days", type=int, default=365, help="validity (default: 365)")
    parser.set_defaults(func=run)


def _run(args: argparse.Namespace) -> int:
    from sluice.security.certificates import write_development_pki

    if args.days < 1:
        raise ToolError("--days must be at least 1")
    hosts = args.broker_host or ["localhost", "127.0.0.1"]
    try:
        pki = write_development_pki(
            args.dir, hosts, args.client, key_password=args.key_password, days=args.days,
            broker_name=args.broker_name,
        )  # fmt: skip
    except (OSError, ValueError) as exc:
        raise ToolError(f"cannot write the certificates: {exc}") from exc
    password = f"\nssl.key.password={args.key_password}" if args.key_password else ""
    print(f"CA certificate:     {pki.ca}  (its key: {pki.ca_key})")
    print(f"broker keystore:    {pki.broker}  (valid for {', '.join(hosts)})")
    for name, path in pki.clients.items():
        print(f"client keystore:    {path}  (principal User:CN={name})")
    print("\n# broker properties, e.g. for an SSL listener requiring client certificates:")
    print("listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093")
    print("ssl.keystore.type=PEM")
    print(f"ssl.keystore.location={pki.broker.resolve()}{password}")
    print(f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca.resolve()}")
    print("ssl.client.auth=required")
    if pki.clients:
        name, path = next(iter(pki.clients.items()))
        print(f"\n# client properties for {name} (--command-config, --producer.config, ...):")
        print("security.protocol=SSL")
        print(f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca.resolve()}")
        print(f"ssl.keystore.type=PEM\nssl.keystore.location={path.resolve()}{password}")
    return 0


run = tool_command(PROG, _run)
