"""What each Mosquitto release does with each situation in a persistence file: one table, as data.

A :class:`Rule` names a situation (a chunk the loader cannot read, a subscription without a client
id, a session whose expiry passed, ...) and gives, per version range, its :class:`Effect`: the broker
*refuses* the file (exit 1, with the lines it logs), *crashes* (an assert or a segfault while
loading), *crashes-on-delivery* (it starts, then segfaults when a client resumes the session or
subscribes), *skips* the chunk, *drops* data at load, *stops* reading (and loads what came before),
*misreads* the bytes that follow, or *keeps* it. Each rule cites where it comes from: a ChangeLog line
(``ChangeLog L<n>`` = line of ChangeLog.txt in the 2.1.2 tarball), an upstream commit, or the loader's
source at a release tag. Rules marked *measured* were reproduced with the five brokers the tests
start (Debian's 2.0.11, upstream 2.0.14, 2.0.18, 2.0.22, 2.1.2): tests/codec/broker/test_live.py.

Log lines are the broker's own format strings with ``{name}`` placeholders. ``{errno}`` is
``strerror(errno)`` after a short ``fread`` (which does not set errno): whatever an earlier call left
there. Measured: "Not a directory" on 2.0.x (the config loader probes ``-c FILE`` with opendir()) and
"Success" on 2.1.x; 1.x is taken to print "Success". An assert's line gives the stable part of glibc's
message (the file:line prefix differs per build, e.g. ``./src/persist_read.c:554`` on Debian's 2.0.11).
"""

from __future__ import annotations

from dataclasses import dataclass

from codec.broker.versions import Version

ANY_LOW, ANY_HIGH = (0, 0, 0), (99, 99, 99)
V14, V15, V156, V16, V1611, V2 = (1, 4, 0), (1, 5, 0), (1, 5, 6), (1, 6, 0), (1, 6, 11), (2, 0, 0)
V2015, V2016, V2019, V2023, V21, V211 = (2, 0, 15), (2, 0, 16), (2, 0, 19), (2, 0, 23), (2, 1, 0), (2, 1, 1)

COULDNT_OPEN = "Error: Couldn't open database."


@dataclass(frozen=True)
class Effect:
    """What a broker does in a situation: an action, the line(s) it logs, and why (for reports)."""

    action: str  # refuses | crashes | crashes-on-delivery | skips | drops | stops | misreads | keeps | unknown
    log: tuple[str, ...] = ()
    note: str = ""

    @property
    def fatal(self) -> bool:
        return self.action in ("refuses", "crashes")


@dataclass(frozen=True)
class Rule:
    """A situation and its effect per version range (inclusive, first match wins)."""

    id: str
    situation: str
    effects: tuple[tuple[Version, Version, Effect], ...]
    source: str
    measured: bool = False

    def effect(self, v: Version) -> Effect:
        for lo, hi, eff in self.effects:
            if lo <= v <= hi:
                return eff
        return KEEPS


KEEPS = Effect("keeps")


def _until(hi: Version) -> Version:
    """The last release before ``hi`` in the ranges below (patch numbers never reach 99)."""
    major, minor, patch = hi
    return (major, minor, patch - 1) if patch else (major, minor - 1, 99) if minor else (major - 1, 99, 99)


def _refuses(*lines: str, note: str = "") -> Effect:
    return Effect("refuses", (*lines, COULDNT_OPEN), note)


RULES: tuple[Rule, ...] = (
    # ------------------------------------------------------------ the file as a whole
    Rule("empty-file", "the file is 0 bytes long",
         ((ANY_LOW, ANY_HIGH, Effect("keeps", ("Warning: Persistence file is empty.",),
                                     "no saved state: the broker starts empty")),),
         "ChangeLog L2249 (1.4.5: \"Don't error on zero length persistence files. Closes #316.\"); "
         "persist_read.c persist__restore()", measured=True),
    Rule("short-header", "the file is shorter than its 23-byte header",
         ((ANY_LOW, ANY_HIGH, _refuses("Error: {errno}.")),),
         "persist_read.c persist__restore(): fread of the 15 magic bytes, then read_e of CRC and version",
         measured=True),
    Rule("bad-magic", "the first 15 bytes are not Mosquitto's magic (a file of NUL bytes, another format)",
         ((ANY_LOW, ANY_HIGH, _refuses("Error: Unable to restore persistent database. Unrecognised file format.")),),
         "persist_read.c persist__restore()", measured=True),
    Rule("unsupported-version", "the header's db version is one this release cannot read",
         ((ANY_LOW, ANY_HIGH, _refuses("Error: Unsupported persistent database format version {db_version} "
                                       "(need version {native}).")),),
         "persist.h MOSQ_DB_VERSION: 3 up to 1.5.5, 4 from 1.5.6 (commit cbd5306a), 5 from 1.6.0, 6 from 1.6.11 "
         "(commit 212fd863); 1.x refuses only versions above its own, 2.x reads 2-6", measured=True),
    Rule("dbid-size", "the cfg chunk's dbid_size is not 8",
         ((ANY_LOW, ANY_HIGH, _refuses("Error: Incompatible database configuration (dbid size is {dbid_size} bytes, "
                                       "expected 8)")),),
         "persist_read.c persist__restore(), DB_CHUNK_CFG", measured=True),
    Rule("cut-header", "the file ends inside a chunk header",
         ((V14, _until(V16), _refuses("Error: {errno}.", note="1.4/1.5 read the type and the length apart: a cut "
                                      "after the type is a short read")),
          (V16, ANY_HIGH, Effect("stops", (), "the header read fails and the loop ends: what came before loads"))),
         "1.4.15/1.5.11 persist.c persist__restore() (read_e of the length); 1.6+ persist__chunk_header_read()",
         measured=True),
    Rule("short-read", "the file ends (or NUL bytes run out of a chunk) inside a fixed field the loader reads",
         ((ANY_LOW, ANY_HIGH, _refuses("Error: {errno}.")),),
         "persist_read_v234.c / persist_read_v5.c read_e(): \"Error: %s.\" with strerror(errno)", measured=True),
    Rule("short-string", "the file ends inside a string (client id, topic, username) the loader reads",
         ((ANY_LOW, _until(V15), _refuses("Error: {errno}.")),
          (V15, ANY_HIGH, _refuses(note="persist__read_string_len() returns MOSQ_ERR_NOMEM without a log line"))),
         "1.4.15 persist.c read_e of strings; 1.5+ persist__read_string(_len)", measured=True),
    Rule("short-read-quiet", "a 2.1 loader's read fails inside a stored message or a subscription",
         ((V21, ANY_HIGH, _refuses(note="the error paths of the base_msg and sub readers log nothing")),),
         "2.1.2 persist_read_v5.c / persist_read_v234.c: read_e() sets rc = MOSQ_ERR_UNKNOWN (persist.h), the "
         "`error:` labels of persist__chunk_base_msg_read_*() and persist__chunk_sub_read_*() do not log",
         measured=True),
    Rule("props-length-wrap", "a 2.1 v5/v6 stored message whose chunk length is shorter than its fields",
         ((V21, ANY_HIGH, Effect("misreads", (), "the property length wraps past MQTT's maximum: the reader "
                                 "returns rc 0 after the struct, the message is kept without its topic and the "
                                 "loader reads on from inside it")),),
         "2.1.2 persist_read_v5.c persist__chunk_base_msg_read_v56(): `if(length > MQTT_MAX_PAYLOAD) goto error;` "
         "with rc still 0"),
    Rule("unknown-chunk", "a chunk of a type the loader does not know",
         ((ANY_LOW, ANY_HIGH, Effect("skips", ('Warning: Unsupported chunk "{chunk_type}" in persistent database file. '
                                               'Ignoring.',))),),
         "persist_read.c persist__restore(), default case: fseek(length)", measured=True),
    Rule("payload-too-large", "a stored message's payload length is above MQTT's maximum (268,435,455)",
         ((V16, ANY_HIGH, _refuses(note="v5/v6: MOSQ_ERR_INVAL before the payload is read")),),
         "persist_read_v5.c persist__chunk_msg_store_read_v56(); v2-v4 only from 2.0.23/2.1.0 (ChangeLog L335-336, "
         "#3439)"),
    Rule("bad-properties", "a v5/v6 property tail the broker's property reader refuses",
         ((V16, ANY_HIGH, _refuses(note="property__read_all() fails: no log line")),),
         "persist_read_v5.c persist__chunk_msg_store_read_v56() / persist__chunk_client_msg_read_v56()"),

    # ------------------------------------------------------------ one chunk
    Rule("client-no-id", "a client chunk with an empty client id",
         ((V14, _until(V16), _refuses("Error: Corrupt persistent database.")),
          (V16, _until(V2), _refuses(note="persist__chunk_client_read_v5() returns 1: no log line")),
          (V2, ANY_HIGH, Effect("skips", ("Warning: Empty client entry found in persistence database, it may be "
                                          "corrupt.",),
                                "v5/v6; the username is not read, so a non-empty one is read as the next chunk "
                                "(the rest of the file is misread)"))),
         "commit c5d6f323 \"Be more tolerant when loading persistence files.\" (2.0.0); 2.0 persist_read_v5.c "
         "persist__chunk_client_read_v56() returns -1 before reading the username; 1.5.11 persist.c, 1.6.10 "
         "persist_read_v5.c", measured=True),
    Rule("client-no-id-v234", "a v2-v4 client chunk with an empty client id, read by 1.6 or later (1.4/1.5: "
         "client-no-id)",
         ((V16, ANY_HIGH, _refuses(note="persist__find_or_add_context(NULL) fails: rc 1, no log line")),),
         "persist_read.c persist__client_chunk_restore() with persist_read_v234.c", measured=True),
    Rule("client-msg-no-client-id", "a client message with an empty client id",
         ((V14, _until(V16), _refuses("Error: Corrupt persistent database.")),
          (V16, _until(V2), _refuses("Error restoring persistent database, message store corrupt.")),
          (V2, ANY_HIGH, Effect("skips", ("Warning: Persistence file contains client message with no matching client. "
                                          "File may be corrupt.",)))),
         "commit c5d6f323 (2.0.0); 1.5.11 persist.c; 1.6.10 persist_read.c persist__client_msg_restore()",
         measured=True),
    Rule("sub-no-client-id", "a subscription with an empty client id",
         ((V14, _until(V15), Effect("keeps", (), "1.4 reads an empty string, not NULL: a session named ''")),
          (V15, _until(V2019), Effect("crashes", ("persist__restore_sub: Assertion `client_id' failed.",),
                                      "assert() in persist__restore_sub (builds keep asserts: SIGABRT)")),
          (V2019, ANY_HIGH, Effect("skips", ("Warning: Persistence found a subscription with no client id, "
                                             "ignoring.",)))),
         "ChangeLog L449-450 (2.0.19: \"Fix assert failure when loading a persistence file that contains "
         "subscriptions with no client id.\"), commit fd097d5a", measured=True),
    Rule("duplicate-store-id", "two stored messages with one store id (both loaded: neither expired)",
         ((V21, ANY_HIGH, _refuses(note="db__msg_store_add() returns MOSQ_ERR_ALREADY_EXISTS: the restore fails")),
          (V16, _until(V2), Effect("unknown", (), "both are kept, but 1.6.15 served neither's retained topic where "
                                   "2.0 serves the later one (measured; the 1.6 retain path through the "
                                   "subscription tree was not modelled)")),
          (ANY_LOW, _until(V21), Effect("keeps", (), "both are kept; a client message or retain chunk after "
                                        "the second finds the later one (uthash puts it first in the bucket)"))),
         "database.c db__msg_store_add() (2.1.2); persist_read.c HASH_ADD into msg_store_load (1.4-2.0)",
         measured=True),
    Rule("duplicate-store-id-order", "two stored messages with one store id among more than 320 stored messages",
         ((ANY_LOW, _until(V21), Effect("unknown", (), "which of the two a reference finds depends on how "
                                        "uthash's bucket expansion reordered the chain")),),
         "uthash HASH_EXPAND_BUCKETS (reverses chains): not modelled"),
    Rule("store-id-zero", "a stored message with store id 0",
         ((ANY_LOW, ANY_HIGH, Effect("drops", (), "it is given a new id at load (db__message_store: "
                                     "++last_db_id): the client messages and retain chunks naming id 0 find "
                                     "nothing and are dropped")),),
         "database.c db__message_store() `if(!store_id)`", measured=True),
    Rule("nul-topic-retained", "a retained message whose topic starts with a NUL byte (an empty C string)",
         ((V16, _until(V2), Effect("unknown", (), "the retained message is not served, and what the sessions "
                                   "queueing it then receive differs (1.6.15, measured: such a client received none "
                                   "of its queue)")),
          (V2, ANY_HIGH, _refuses(note="sub__topic_tokenise() refuses an empty topic: the retain restore "
                                  "fails"))),
         "topic_tok.c sub__topic_tokenise() `len == 0` (2.0+), persist_read.c persist__retain_chunk_restore()",
         measured=True),
    Rule("nul-topic-sub", "a subscription whose topic filter starts with a NUL byte (an empty C string)",
         ((V16, ANY_HIGH, _refuses(note="sub__add() -> sub__topic_tokenise() refuses an empty filter")),),
         "topic_tok.c / subs.c sub__topic_tokenise()", measured=True),
    Rule("topic-embedded-nul", "a topic with a NUL byte inside it",
         ((ANY_LOW, ANY_HIGH, Effect("keeps", (), "the broker handles topics as C strings: it serves the part "
                                     "before the NUL")),),
         "strlen()/strdup() of the topic everywhere after the read", measured=True),
    Rule("nul-topic-queued", "a queued message whose topic starts with a NUL byte (an empty C string)",
         ((ANY_LOW, ANY_HIGH, Effect("unknown", (), "sent as a PUBLISH with an empty topic: a client that checks "
                                     "it disconnects (paho does) and the queue behind it is then not received; "
                                     "the outcome depends on the client")),),
         "measured with paho against 1.6.15, 2.0.11-2.0.22, 2.1.2 (the client received none of its queue)",
         measured=True),
    Rule("bad-utf8-topic", "a retained or queued message whose topic is not valid UTF-8",
         ((ANY_LOW, ANY_HIGH, Effect("unknown", (), "sent as it is: a client that checks UTF-8 (paho does) drops "
                                     "the connection, so what it receives depends on the client")),),
         "measured with paho against 1.6.15, 2.0.11-2.0.22, 2.1.2 (no SUBACK after such a retained message; a "
         "session received 2 of 8 queued messages)", measured=True),
    Rule("wildcard-topic-retained", "a retained message whose topic holds + or #",
         ((ANY_LOW, _until(V16), Effect("drops", (), "1.4/1.5 keep retained messages in the subscription tree: "
                                        "the level is taken as a wildcard and never served to #")),),
         "measured with 1.4.15 and 1.5.11 (1.6 and later serve it)", measured=True),
    Rule("topic-hierarchy-limit", "a topic past the tokeniser's TOPIC_HIERARCHY_LIMIT (200): on 1.5 counted in "
         "characters (a topic of 200 bytes or more), on 1.6 in levels (more than 200)",
         ((V15, _until(V16), _refuses(note="sub__topic_tokenise() counts every character against the 200-level "
                                      "limit (1.5 bug): a subscription's sub__add() fails; a retained message is "
                                      "loaded but never served")),
          (V16, _until(V2), _refuses(note="sub__topic_tokenise(): more than 200 levels: a subscription's sub__add() "
                                     "fails; a retained message is loaded but never served"))),
         "subs.c sub__topic_tokenise() `count > TOPIC_HIERARCHY_LIMIT` (1.5.11: count++ per character; 1.6.15: "
         "per level; 2.0 has no limit)", measured=True),
    Rule("bad-direction", "a client message whose direction is neither 0 (in) nor 1 (out)",
         ((ANY_LOW, _until(V16), Effect("unknown", (), "1.4/1.5 keep one message list per client and send by "
                                        "state, not direction: measured, 1.5.11 delivered such a message; not "
                                        "modelled")),
          (V16, ANY_HIGH, Effect("keeps", (), "restored as incoming (only direction 1 is outgoing)"))),
         "persist.c persist__client_msg_restore() (1.5: one list); persist_read.c `direction == mosq_md_out` "
         "(1.6+)", measured=True),
    Rule("share-sub-restored", "a restored subscription to a $share/... filter",
         ((V16, _until(V2), Effect("unknown", (), "1.6 restores retained messages through the subscription tree: "
                                   "a shared subscriber was measured to receive matching retained messages as "
                                   "queued ones (4 queued + 8 retained); not modelled")),),
         "persist_read.c persist__retain_chunk_restore() -> sub__messages_queue() (1.6.15), measured", measured=True),
    Rule("share-topic-queued", "a queued message whose topic starts with $share",
         ((V16, ANY_HIGH, Effect("drops", (), "never delivered: the ACL check refuses $share topics "
                                 "(security.c / plugin_acl_check.c)")),),
         "security.c mosquitto_acl_check() `$share` (2.0), plugin_acl_check.c (2.1)", measured=True),
    Rule("qos-invalid-queued", "a queued message with a QoS above 2",
         ((V16, ANY_HIGH, Effect("drops", (), "never sent")),),
         "measured with 1.6.15, 2.0.11, 2.0.22, 2.1.2", measured=True),
    Rule("mid-zero-queued", "a queued QoS 1/2 message with message id 0",
         ((ANY_LOW, ANY_HIGH, Effect("keeps", (), "sent with packet id 0: the outcome depends on the client "
                                     "(a strict client disconnects with a protocol error; paho accepts it)")),),
         "measured with paho against 1.6.15, 2.0.11, 2.0.22, 2.1.2", measured=True),
    Rule("retain-twice", "two retain chunks naming one stored message that no client message holds",
         ((V2, _until(V21), Effect("unknown", (), "the second retain__store() frees the message while it is "
                                   "retained (use after free): what the broker then serves is undefined "
                                   "(garbage)")),),
         "retain.c retain__store() db__msg_store_ref_dec() (2.0; 2.1 returns early when it is the same message)",
         measured=True),
    Rule("sub-no-topic", "a subscription with an empty topic filter",
         ((V14, _until(V15), _refuses(note="1.4 adds the empty filter: sub_add fails, rc 1")),
          (V15, _until(V2019), Effect("crashes", ("persist__restore_sub: Assertion `sub' failed.",),
                                      "assert() in persist__restore_sub")),
          (V2019, ANY_HIGH, Effect("skips", ("Warning: Persistence found a subscription with no topic filter, "
                                             "ignoring.",)))),
         "commit fd097d5a (2.0.19) persist_read.c persist__restore_sub()", measured=True),
    Rule("dangling-client-msg", "a client message whose stored message was not loaded before it (missing, "
                                "expired, or later in the file)",
         ((V14, _until(V16), _refuses("Error restoring persistent database, message store corrupt.")),
          (V16, ANY_HIGH, Effect("drops", (), "\"Can't find message - probably expired\": dropped silently"))),
         "1.5.11 persist.c persist__client_msg_restore(); 1.6+ persist_read.c", measured=True),
    Rule("dangling-retain", "a retain chunk whose stored message was not loaded before it",
         ((V14, _until(V16), _refuses("Error: Corrupt database whilst restoring a retained message.")),
          (V16, ANY_HIGH, Effect("drops", (), "dropped silently"))),
         "1.5.11 persist.c persist__retain_chunk_restore(); 1.6+ persist_read.c", measured=True),
    Rule("empty-topic-store", "a stored message with topic length 0",
         ((V14, _until(V21), Effect("crashes-on-delivery", (),
                                    "stored with a NULL topic: a retain chunk for it segfaults the load "
                                    "(strlen(NULL) in sub__topic_tokenise); a queued outgoing message segfaults "
                                    "the broker when its client resumes the session; an incoming QoS 2 one is "
                                    "harmless (the broker's own denied-message case)")),
          (V21, ANY_HIGH, _refuses(note="MOSQ_ERR_INVAL, no log line of its own"))),
         "commit 34ef74e7 \"Fix corrupt persistence restore case\" (2.1.0), 2.1.2 persist_read.c "
         "persist__base_msg_chunk_restore(); 2.0.22 database.c db__message_store() keeps a NULL topic",
         measured=True),
    Rule("expired-message", "a stored message whose expiry time has passed (or lies more than 2^32 s ahead)",
         ((V16, ANY_HIGH, Effect("drops", (), "not loaded: its retain and client-message chunks find nothing")),),
         "persist_read.c persist__msg_store_chunk_restore(): expiry_time - now < 0 or > UINT32_MAX", measured=True),

    # ------------------------------------------------------------ after the load
    Rule("expired-session", "a v5/v6 session whose session_expiry_time has passed",
         ((V16, _until(V2015), Effect("keeps", (), "restored sessions are never put on the expiry list")),
          (V2015, _until(V21), Effect("drops", ("Expiring client {client_id} due to timeout.",),
                                      "in the first main-loop pass, after listeners and bridges start")),
          (V21, ANY_HIGH, Effect("drops", ("Expiring client {client_id} due to timeout.",),
                                 "during start-up, before listeners and bridges"))),
         "ChangeLog L575-576 (2.0.15: \"Add clients to session expiry check list when restarting and reloading from "
         "persistence. Closes #2546.\"), commits c99502a2, 08610f7c; 2.1: commit b8564daa (src/mosquitto.c calls "
         "session_expiry__check() right after the restore)", measured=True),
    Rule("session-expiry-zero", "a v5/v6 session with an interval but session_expiry_time 0",
         ((V2015, _until(V2016), Effect("drops", ("Expiring client {client_id} due to timeout.",),
                                        "expiry time 0 lies in the past")),
          (V2016, ANY_HIGH, Effect("keeps", (), "restored with now + interval"))),
         "commit 1af3152d \"Fix persisted clients being restored without a session expiry time\" (2.0.16)",
         measured=True),
    Rule("v34-session", "a session from a v2-v4 file (Mosquitto 1.5 or older: no session expiry in the file)",
         ((V14, _until(V16), Effect("keeps", (), "1.x resumes every restored session (clean session false)")),
          (V16, _until(V2015), Effect("drops", (), "restored with interval 0: kept in memory, but a reconnecting "
                                      "client gets no session (handle_connect.c needs interval > 0)")),
          (V2015, ANY_HIGH, Effect("drops", ("Expiring client {client_id} due to timeout.",),
                                   "restored with interval 0: expired about a second after start"))),
         "persist_read_v234.c (no interval read), session_expiry.c session_expiry__add_from_persistence(), "
         "handle_connect.c connect__on_authorised()", measured=True),
    Rule("no-client-chunk", "a session known only from subscription or client-message chunks (no client chunk)",
         ((V14, _until(V16), Effect("keeps", (), "1.x resumes every restored context")),
          (V16, ANY_HIGH, Effect("drops", (), "created with interval 0 and never resumed; its queue is never "
                                 "delivered"))),
         "persist_read.c persist__find_or_add_context() (context__init: interval 0); handle_connect.c"),
    Rule("persistent-client-expiration", "persistent_client_expiration is set (conf) and the session's time ran out",
         ((V14, _until(V16), Effect("drops", (), "1.x: disconnect_t + persistent_client_expiration")),
          (V2015, ANY_HIGH, Effect("drops", ("Expiring client {client_id} due to timeout.",),
                                   "sessions that never expire are put on the expiry list too"))),
         "ChangeLog L1412-1413 (#1494); session_expiry.c session_expiry__add_from_persistence()"),
    Rule("symlink", "the persistence file is a symbolic link",
         ((V21, _until(V211), Effect("drops", (), "opened with O_NOFOLLOW: ignored, the broker starts empty")),
          (V211, ANY_HIGH, Effect("drops", (), "ignored (the broker starts empty) unless "
                                  "MOSQUITTO_UNSAFE_ALLOW_SYMLINKS is set"))),
         "commit fd4f4bc3 \"Don't allow files to be symbolic links\" (2.1.0); ChangeLog L20 "
         "(MOSQUITTO_UNSAFE_ALLOW_SYMLINKS, 2.1.1)", measured=True),
    Rule("queue-qos0-off", "queue_qos0_messages is false (conf) and the file holds queued QoS 0 messages",
         ((ANY_LOW, ANY_HIGH, Effect("keeps", (), "restored QoS 0 entries are delivered on reconnect: the option "
                                     "applies to new messages only")),),
         "database.c db__message_reconnect_reset_outgoing() moves restored entries to in-flight regardless",
         measured=True),
    Rule("max-queued", "a restored queue is longer than max_queued_messages (conf)",
         ((ANY_LOW, ANY_HIGH, Effect("keeps", (), "every restored entry is delivered: the limit applies when "
                                     "queueing new messages")),),
         "persist_read.c persist__client_msg_restore() and db__message_reconnect_reset_outgoing() check no limit",
         measured=True),
    Rule("interval-zero", "a v5/v6 session whose session expiry interval is 0",
         ((V16, _until(V2015), Effect("drops", (), "kept in memory, never resumed (handle_connect.c needs "
                                      "interval > 0)")),
          (V2015, ANY_HIGH, Effect("drops", ("Expiring client {client_id} due to timeout.",),
                                   "expired right after start"))),
         "handle_connect.c connect__on_authorised(); session_expiry.c session_expiry__add_from_persistence()"),
    Rule("restore-stats", "the load ends (2.1 reports what it restored)",
         ((V21, ANY_HIGH, Effect("keeps", ("Restored {base} base messages", "Restored {retained} retained messages",
                                           "Restored {clients} clients", "Restored {subs} subscriptions",
                                           "Restored {cmsgs} client messages"),
                                 "counts as the loader keeps them: subscriptions and client messages read without "
                                 "an error (ignored ones included), clients, retained and base messages restored")),),
         "ChangeLog L133 (2.1.0: \"Report persistence stats when starting.\"); 2.1.2 persist_read.c persist__restore()",
         measured=True),
    Rule("refusal-overwrites", "the broker refused the file (not a crash)",
         ((V21, ANY_HIGH, Effect("drops", ("mosquitto version {version} terminating",
                                           "Saving in-memory database to {path}."),
                                 "on its way out it saves what it had loaded so far over the file: the rest of "
                                 "the original is gone, and the next start loads the remains without a word")),),
         "2.1.2 src/mosquitto.c: the db__open() error path calls post_shutdown_cleanup(), which calls "
         "persist__backup(true); 2.0.22 returns without saving", measured=True),
    Rule("persistence-off", "the configuration does not enable persistence (persistence false, the default)",
         ((ANY_LOW, ANY_HIGH, Effect("drops", (), "the file is never read: the broker starts empty and overwrites "
                                     "nothing (it saves nothing either)")),),
         "persist_read.c persist__restore(): `if(!db.config->persistence ...) return MOSQ_ERR_SUCCESS;`"),
    Rule("world-readable", "the persistence file is readable by every user",
         ((V2016, ANY_HIGH, Effect("keeps", ("Warning: File {path} has world readable permissions. Future versions "
                                             "will refuse to load this file.",))),),
         "ChangeLog L525, commit 4ca294fd (2.0.16)", measured=True),
    Rule("bridge-local-session", "the session of a bridge configured in mosquitto.conf",
         ((V2, _until(V2016), Effect("drops", (), "cleansession and local_cleansession differ: expired at start")),
          (V2016, ANY_HIGH, Effect("keeps", (), "the bridge's local session; its queue goes to the remote broker"))),
         "ChangeLog L521-522 (2.0.16, #2634), commit 6d240a9d"),
)

BY_ID = {r.id: r for r in RULES}

# strerror(errno) after a short fread, per release (see the module docstring)
ERRNO_TEXT = ((V2, _until(V21), "Not a directory"), (V21, ANY_HIGH, "Success"), (ANY_LOW, ANY_HIGH, "Success"))


def errno_text(v: Version) -> str:
    return next(t for lo, hi, t in ERRNO_TEXT if lo <= v <= hi)


def native_db_version(v: Version) -> int:
    """MOSQ_DB_VERSION of a release: the db version it writes."""
    if v < V156:
        return 3
    if v < V16:
        return 4
    if v < V1611:
        return 5
    return 6


def reads_db_version(v: Version, db_version: int) -> bool:
    """Whether a release's loader accepts a file of ``db_version``: 2 up to the version it writes.

    (1.x compares ``db_version > MOSQ_DB_VERSION`` only, so it would also try versions 0 and 1; no
    broker ever wrote those, and the codec refuses them, so the model counts them as refused.)
    """
    return 2 <= db_version <= native_db_version(v)


def effect(rule_id: str, v: Version) -> Effect:
    return BY_ID[rule_id].effect(v)


def fill(lines: tuple[str, ...], v: Version, **values: object) -> list[str]:
    """The log lines with their placeholders filled (``{errno}`` from the release)."""
    values.setdefault("errno", errno_text(v))
    return [line.format(**values) for line in lines]


__all__ = ["BY_ID", "COULDNT_OPEN", "Effect", "KEEPS", "RULES", "Rule", "effect", "errno_text", "fill",
           "native_db_version", "reads_db_version"]
