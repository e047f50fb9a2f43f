"""DeleteTopics (20): delete topics and their logs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.protocol import ErrorCode, Request
from sluice.server.messages import build, field

if TYPE_CHECKING:
    from sluice.server.broker import Broker


def handle(broker: Broker, request: Request) -> Any:
    body: Any = request.body
    names: list[tuple[str | None, Any]] = []
    if field(body, "topics") is not None and request.api_version >= 6:
        for t in body.topics:
            info = (
                broker.registry.by_id(t.topic_id) if t.name is None else broker.registry.get(t.name)
            )
            names.append((t.name if info is None else info.name, t.topic_id))
    else:
        names = [(n, None) for n in body.topic_names]
    responses = []
    for name, topic_id in names:
        entry: dict[str, Any] = {"name": name, "topic_id": topic_id, "error_message": None}
        if not broker.config["delete.topic.enable"]:
            entry["error_code"] = ErrorCode.topic_deletion_disabled
        elif name is None or broker.registry.get(name) is None:
            entry["error_code"] = (
                ErrorCode.unknown_topic_id if name is None else ErrorCode.unknown_topic_or_partition
            )
        else:
            broker.delete_topic(name)
            entry["error_code"] = ErrorCode.none
        responses.append(entry)
    return build(request.response_type, throttle_time=0, responses=responses)
