"""``config/server.properties`` as Sluice ships it: every broker config Sluice honours,
with its meaning and default, rendered from :data:`sluice.config.BROKER_CONFIGS`.

``python -m sluice.server_properties > config/server.properties`` writes it again after
the table changes; a test checks that the shipped file is what this renders.
"""

from __future__ import annotations

import textwrap

from sluice.config import BROKER_CONFIGS, format_config_value
from sluice.config_compat import IGNORED_BROKER_CONFIGS

__all__ = ["ACTIVE", "render_server_properties"]

ACTIVE: dict[str, str] = {
    "broker.id": "0",
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "log.dirs": "./sluice-data",
}
"""The settings the file makes (each its config's default); everything else is shown
commented out with its default."""

_HEADER = """\
# A Sluice broker's configuration: `sluice broker --config config/server.properties`.
# Keys are Kafka's names; each `--override key=value` on the command line is applied
# after this file. Every config Sluice honours is listed below, commented out, with its
# default: uncomment a line to change it. "Sluice:" marks configs Kafka does not have.
#
# These Kafka broker configs are accepted but have no effect in Sluice; the broker
# names the ones given in one warning when it starts:
{ignored}
#
# Any other key Sluice does not know stops the broker (exit code 2) with the nearest
# known key as a suggestion. KRaft's keys (process.roles, node.id,
# controller.quorum.*) are refused: Sluice runs in ZooKeeper mode.
"""


def _comment(text: str) -> str:
    return "\n".join(textwrap.wrap(text, width=86, initial_indent="# ", subsequent_indent="# "))


def render_server_properties() -> str:
    """The text of ``config/server.properties``."""
    ignored = "\n".join(
        "\n".join(
            textwrap.wrap(f"{key}: {why}", 84, initial_indent="#   ", subsequent_indent="#     ")
        )
        for key, why in IGNORED_BROKER_CONFIGS.items()
    )
    parts = [_HEADER.format(ignored=ignored)]
    parts.append("############################# Settings #############################\n")
    parts.extend(f"{key}={value}" for key, value in ACTIVE.items())
    parts.append("\n######################## Every config and its default ########################")
    for definition in BROKER_CONFIGS.values():
        value = format_config_value(definition.default)
        parts.append("")
        parts.append(_comment(definition.doc))
        if value is None:
            parts.append(f"# (no default)\n#{definition.name}=")
        else:
            parts.append(f"#{definition.name}={value}")
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    print(render_server_properties(), end="")
