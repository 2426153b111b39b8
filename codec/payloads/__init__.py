"""Payload decoders: one registry (:class:`PayloadDecoder`) used by every face — the inspector's
field tree, ``dump --json``, the exporters, Spark and ``mosqdb sql``.

Formats: UTF-8 text, JSON, CBOR, MessagePack, Sparkplug B, any protobuf message of a descriptor set,
each optionally gzip- or zlib-wrapped; chosen per topic filter or detected (see :mod:`.registry`).
Nothing here imports a payload library until a payload of its format is decoded.
"""

from codec.payloads.model import Decoded, Field, PayloadError, canonical_json
from codec.payloads.registry import FORMAT_HELP, PayloadDecoder, Rule, parse_rule

__all__ = ["FORMAT_HELP", "Decoded", "Field", "PayloadDecoder", "PayloadError", "Rule", "canonical_json", "parse_rule"]
