"""A cluster's SCRAM credentials in ZooKeeper, as Kafka's ZooKeeper mode keeps them.

A user's credentials are keys of their user config, ``/config/users/<user>`` (the name
URL-encoded, as Kafka's ``Sanitizer`` does): ``{"version":1,"config":{"SCRAM-SHA-256":
"salt=...,stored_key=...,server_key=...,iterations=4096"}}``, beside whatever else that
config holds (client quotas), which a change leaves as it was. Each change is announced
with ``/config/changes/config_change_<seq>`` = ``{"version":2,"entity_path":"users/<user>"}``;
every broker watches ``/config/changes`` (:class:`~sluice.server.cluster.ClusterManager`)
and reloads that user into its cache, so a user created through one broker can
authenticate on any other as soon as the notification arrives.
"""

from __future__ import annotations

import contextlib
import logging
import urllib.parse

from sluice.controller.zk_data import ConfigEntityChangeNotificationZNode, TopicConfigZNode
from sluice.metastore import BadVersionError, CreateMode, NodeExistsError, NoNodeError
from sluice.metastore.store import CoordinationStore, ensure_path
from sluice.security.sasl.credential_store import (
    ScramCredentialCache,
    UserChanges,
    credentials_from_config,
)

__all__ = ["ZkScramCredentialStore", "desanitize", "sanitize"]

log = logging.getLogger(__name__)

USERS_PATH = "/config/users"


def sanitize(user: str) -> str:
    """A user name as a znode name (Kafka's ``Sanitizer.sanitize``: URL encoding)."""
    return urllib.parse.quote(user, safe="")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)


def user_path(user: str) -> str:
    return f"{USERS_PATH}/{sanitize(user)}"


class ZkScramCredentialStore:
    """The credentials of every user, loaded from ZooKeeper and kept up to date by
    :meth:`reload_user` (on each ``users/<user>`` change notification)."""

    __slots__ = ("cache", "store")

    def __init__(self, store: CoordinationStore) -> None:
        self.store = store
        self.cache = ScramCredentialCache()

    def load(self) -> None:
        """Read every user's credentials (blocking; at start)."""
        try:
            names = self.store.get_children(USERS_PATH)
        except NoNodeError:
            return
        for name in names:
            self.reload_user(desanitize(name))

    def reload_user(self, user: str) -> None:
        """Take ``user``'s credentials from ZooKeeper into the cache."""
        try:
            data, _ = self.store.get(user_path(user))
            credentials = credentials_from_config(TopicConfigZNode.decode(data))
        except NoNodeError:
            credentials = {}
        except ValueError as exc:
            log.error("SCRAM credentials of user %s in ZooKeeper are not valid: %s", user, exc)
            return
        self.cache.set_user(user, credentials)

    def persist(self, changes: UserChanges) -> None:
        store = self.store
        ensure_path(store, USERS_PATH)
        for user, by_mechanism in changes.items():
            path = user_path(user)
            while True:  # read, change the SCRAM keys only, write if nobody wrote meanwhile
                try:
                    data, stat = store.get(path)
                    config, version = TopicConfigZNode.decode(data), stat.version
                except NoNodeError:
                    config, version = {}, None
                for mechanism, credential in by_mechanism.items():
                    if credential is None:
                        config.pop(mechanism, None)
                    else:
                        config[mechanism] = credential.to_string()
                encoded = TopicConfigZNode.encode(config)
                try:
                    if version is None:
                        store.create(path, encoded)
                    else:
                        store.set(path, encoded, version)
                    break
                except (BadVersionError, NodeExistsError, NoNodeError):
                    continue
            change = ConfigEntityChangeNotificationZNode
            ensure_path(store, change.path)
            with contextlib.suppress(NodeExistsError):
                store.create(
                    f"{change.path}/{change.prefix}",
                    change.encode(f"users/{sanitize(user)}"),
                    CreateMode.PERSISTENT_SEQUENTIAL,
                )
        self.cache.apply(changes)
