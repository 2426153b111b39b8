"""The payload decoding options every face shares: ``--decode FILTER=FORMAT`` (repeatable),
``--proto FILE.desc`` (repeatable) and ``--decode-config FILE``; one PayloadDecoder from them."""

from __future__ import annotations

import argparse
from typing import Any

from inspector.commands import UsageError


def add_decode_options(p: argparse.ArgumentParser) -> None:
    from codec.payloads.registry import FORMAT_HELP

    g = p.add_argument_group("payload decoding")
    g.add_argument("--decode", action="append", default=[], metavar="FILTER=FORMAT",
                   help=f"decode the payloads of topics matching FILTER as FORMAT, repeatable, first match wins; "
                        f"FORMAT: {FORMAT_HELP}; --decode auto detects every topic's format")
    g.add_argument("--proto", action="append", default=[], metavar="FILE.desc",
                   help="a protobuf descriptor set (protoc --descriptor_set_out=FILE.desc --include_imports) whose "
                        "messages --decode may name: --decode 'topic/#=package.Message'")
    g.add_argument("--decode-config", metavar="FILE",
                   help="rules file: one FILTER=FORMAT a line (after the --decode rules), @proto PATH lines")


def decoder_from(args: argparse.Namespace) -> Any:
    """The PayloadDecoder the options ask for, or None (no option: outputs stay as they were)."""
    from codec.payloads import PayloadDecoder, PayloadError

    try:
        return PayloadDecoder.from_options(getattr(args, "decode", None) or (), getattr(args, "proto", None) or (),
                                           getattr(args, "decode_config", None))
    except PayloadError as exc:
        raise UsageError(exc.reason) from None
