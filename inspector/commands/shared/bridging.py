"""``--conf mosquitto.conf`` and ``--include-bridges``: the options that make a command bridge-aware.

With a configuration, the sessions its bridges use are known (and left alone by commands that remove
or change sessions unless ``--include-bridges``); without one, sessions named ``local.*`` are taken for
bridge sessions. An unreadable or invalid configuration is a usage error: one line naming the file
(and line), exit 2, before anything is read or written.
"""

from __future__ import annotations

import argparse
from typing import Any

from inspector.commands import UsageError


def add_conf(p: argparse.ArgumentParser, *, include: bool = True) -> None:
    p.add_argument("--conf", metavar="MOSQUITTO_CONF",
                   help="the broker's configuration (and its include_dir): maps each bridge to its local session")
    if include:
        p.add_argument("--include-bridges", action="store_true",
                       help="also touch the sessions of live bridges (those --conf names; without --conf, "
                            "sessions named local.*), which are otherwise left alone")


def add_broker_options(p: argparse.ArgumentParser, *, store_queues: bool = False) -> None:
    """``--broker VERSION`` and ``--conf`` (check, guard); light, as every command's parser is built at start-up.
    ``store_queues``: the command also reads a 2.1 store's queue settings from the configuration."""
    from codec.broker.versions import ACCEPTED

    p.add_argument("--broker", metavar="VERSION", help="predict what this Mosquitto release does with the file "
                   f"(MAJOR.MINOR.PATCH in {ACCEPTED}, or auto: the release the file's db version suggests)")
    p.add_argument("--conf", metavar="MOSQUITTO.CONF", help="the broker's configuration: persistence_location/"
                   "persistence_file (FILE may then be left out), persistent_client_expiration, bridges"
                   + ("; for a 2.1 store (the persist-sqlite plugin's), the queue settings its restore keeps entries "
                      "by" if store_queues else ""))


def load_conf(args: argparse.Namespace) -> Any:
    """The :class:`codec.broker.conf.BrokerConf` of ``--conf`` (None without it); errors exit 2."""
    path = getattr(args, "conf", None)
    if not path:
        return None
    from codec.broker.conf import ConfError, read_conf

    try:
        return read_conf(path)
    except ConfError as exc:
        raise UsageError(f"--conf {exc}") from None
