"""What the live-broker commands (``replay``, ``live``) share: the connection options, the target URL,
the numeric checks, topic filters, the progress bar over items and the one output (JSON or lines)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator

from codec.values import json_text, printable
from codec.views.query import valid_filter
from inspector.commands import UsageError
from inspector.commands.shared.progress import progress

PROTOCOLS = ("5", "3.1.1")


def connection_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("connection")
    g.add_argument("--cafile", metavar="PEM", help="mqtts://: CA certificates to verify the broker with "
                   "(default: the system's)")
    g.add_argument("--cert", metavar="PEM", help="mqtts://: client certificate")
    g.add_argument("--key", metavar="PEM", help="mqtts://: the client certificate's key")
    g.add_argument("--insecure", action="store_true", help="mqtts://: do not verify the broker's certificate")
    g.add_argument("--protocol", choices=PROTOCOLS, default="5",
                   help="MQTT version (default 5; 3.1.1 carries no properties, expiry or subscription options)")
    g.add_argument("--timeout", type=float, default=10.0, metavar="S",
                   help="connect and acknowledgement timeout in seconds (default 10)")
    g.add_argument("--window", type=int, default=20, metavar="N",
                   help="messages in flight at once (default 20; never more than the broker's Receive Maximum)")


def mqtt_target(args: argparse.Namespace, url: str):  # type: ignore[no-untyped-def]
    from exporters.live.url import BadTarget, parse_target

    try:
        return parse_target(url, cafile=args.cafile, certfile=args.cert, keyfile=args.key, insecure=args.insecure)
    except BadTarget as exc:
        raise UsageError(str(exc)) from None


def check_numbers(args: argparse.Namespace) -> None:
    if args.timeout <= 0 or args.window < 1:
        raise UsageError("--timeout must be > 0 and --window at least 1")
    if getattr(args, "rate", None) is not None and args.rate <= 0:
        raise UsageError("--rate must be > 0 (messages per second)")
    if getattr(args, "quiet_period", 1.0) <= 0 or getattr(args, "collect_timeout", 1.0) <= 0:
        raise UsageError("--quiet-period and --collect-timeout must be > 0")
    if getattr(args, "expect", None) is not None and args.expect < 1:
        raise UsageError("--expect must be at least 1")


def topic_filters(values: list[str] | None) -> list[str]:
    for f in values or []:
        if not valid_filter(f):
            raise UsageError(f"not a valid MQTT topic filter: {f!r}")
    return list(values or [])


@contextlib.contextmanager
def item_bar(args: argparse.Namespace, label: str) -> Iterator[Callable[[str, int, int], None]]:
    with progress(args, label, unit="items", enabled=not args.json) as bar:
        if bar is None:
            yield lambda stage, done, total: None
        else:
            yield lambda stage, done, total: bar(done, max(total, done), stage)


def emit(args: argparse.Namespace, data: dict, text: list[str]) -> None:
    if args.json:
        print(json_text(data))
    else:
        print("\n".join(printable(line) for line in text))
