"""What the selecting options mean (``dump --type``, ``export --kind``, ``--topic``, ``--client``,
``--store-id``): one reading for every command that takes them."""

from __future__ import annotations

import argparse

from codec.errors import CodecError
from codec.views.query import Selection, parse_store_ids, valid_filter
from inspector.commands import UsageError

KIND_ORDER = ("cfg", "msg_store", "client_msg", "retain", "sub", "client", "unknown")


def selection_from_args(args: argparse.Namespace) -> Selection:
    kinds = None
    if getattr(args, "type", None):
        kinds = {"retain" if k.strip() == "retained" else k.strip() for k in args.type.split(",") if k.strip()}
        bad = kinds - set(KIND_ORDER)
        if bad:
            raise UsageError(f"unknown chunk type {', '.join(sorted(bad))}; use {', '.join(KIND_ORDER)}")
    try:
        return Selection(
            kinds=kinds,
            topics=list(getattr(args, "topic", []) or []),
            clients=set(getattr(args, "client", []) or []),
            store_ids=parse_store_ids(args.store_id) if getattr(args, "store_id", None) else None,
        )
    except CodecError as exc:
        raise UsageError(exc.reason) from None


KIND_CHOICES = ("cfg", "msg_store", "client_msg", "retain", "sub", "client", "messages")

KIND_ALIASES = {"retained": "retain"}  # one kind, two spellings: --kind retain and --kind retained everywhere


def parse_kinds(values: list[str], also: tuple[str, ...] = ()) -> list[str]:
    """``--kind`` values (repeatable, comma separated): chunk kinds, ``messages``, and the command's own ``also``."""
    choices = KIND_CHOICES + also
    kinds = [KIND_ALIASES.get(k.strip(), k.strip()) for v in values for k in v.split(",") if k.strip()]
    for k in kinds:
        if k not in choices:
            raise UsageError(f"unknown kind {k!r} (use {', '.join(choices)})")
    return kinds


def selection_from(args: argparse.Namespace, kinds: list[str] | None) -> Selection:
    for f in args.topic:
        if not valid_filter(f):
            raise UsageError(f"not a valid MQTT topic filter: {f!r}")
    try:
        ids = parse_store_ids(args.store_id) if getattr(args, "store_id", None) else None
    except CodecError as exc:
        raise UsageError(exc.reason) from None
    chunk_kinds = {k for k in kinds if k != "messages"} if kinds else None
    return Selection(kinds=chunk_kinds, topics=list(args.topic), clients=set(args.client), store_ids=ids)
