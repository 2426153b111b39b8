"""One MQTT connection with paho-mqtt (its v2 callback API), MQTT 5 or 3.1.1, plain or TLS.

Every way a connection can fail ends in one :class:`LiveError` line naming the target
without its password: refused credentials (the CONNACK's reason), an unreachable host,
a TLS handshake that fails (certificate, host name), a broker that goes away mid-way.
The network loop is paho's thread (``loop_start()``) with ``reconnect_on_failure=False``: paho
would otherwise reconnect on its own, and a replay must stop where it is, not resend behind our back.

Ordering is what makes acknowledgements mean something: a broker handles one connection's
packets in order, so the UNSUBACK of a :meth:`Connection.barrier` confirms that every
PUBLISH written before it was processed (QoS 0 ones included).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import uuid
from collections.abc import Callable
from typing import Any

from codec.errors import CodecError
from exporters.live.url import Target

NEVER = 0xFFFF_FFFF
MQTT5, MQTT311 = "5", "3.1.1"
AUTH_REFUSALS = ("Not authorized", "Bad user name or password", "Bad username or password")


class LiveError(CodecError):
    """A live broker refused us, failed or went away: one line, naming the target (never its password)."""


class Connection:
    """A connected client. ``on_message(msg)`` runs in the network thread."""

    def __init__(self, target: Target, client_id: str, *, protocol: str = MQTT5, clean_start: bool = True,
                 session_expiry: int = 0, manual_ack: bool = False, timeout: float = 10.0,
                 on_message: Callable[[Any], None] | None = None, keepalive: int = 60) -> None:
        self.target = target
        self.client_id = client_id
        self.protocol = protocol
        self.clean_start = clean_start
        self.session_expiry = session_expiry
        self.timeout = timeout
        self.keepalive = keepalive
        self.on_message = on_message
        self.cond = threading.Condition()
        self.connected = False
        self.session_present = False
        self.refused: str | None = None
        self.lost: str | None = None  # why the connection ended when we did not end it
        self.leaving = False  # we are disconnecting: the end of the connection is no loss
        self.receive_maximum = 65535  # the broker's (CONNACK), caps our QoS 1/2 window
        self.maximum_packet_size: int | None = None
        self.maximum_qos = 2
        self.retain_available = True
        self.acks: dict[int, Any] = {}  # mid -> reason code (None: QoS 0 written / v3 ack)
        self.subacks: dict[int, list[Any]] = {}
        self.unsubacks: set[int] = set()
        self._started = False
        self.client = self._make_client(manual_ack)

    # ------------------------------------------------------------ set-up
    def _make_client(self, manual_ack: bool) -> Any:
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        if self.protocol == MQTT5:
            c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=self.client_id, protocol=mqtt.MQTTv5,
                            manual_ack=manual_ack, reconnect_on_failure=False)
        else:
            c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=self.client_id, protocol=mqtt.MQTTv311,
                            clean_session=self.clean_start, manual_ack=manual_ack, reconnect_on_failure=False)
        t = self.target
        if t.username is not None:
            c.username_pw_set(t.username, t.password)
        if t.tls:
            ctx = ssl.create_default_context(cafile=t.cafile)
            if t.certfile:
                try:
                    ctx.load_cert_chain(t.certfile, t.keyfile)
                except (OSError, ssl.SSLError) as exc:
                    raise LiveError(f"{t.display}: cannot use the client certificate {t.certfile}: {_why(exc)}") from None
            if t.insecure:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            c.tls_set_context(ctx)
            c.tls_insecure_set(t.insecure)
        c.connect_timeout = self.timeout
        c.max_inflight_messages_set(0)  # our window decides; paho must not hold messages back on its own
        c.on_connect = self._on_connect
        c.on_disconnect = self._on_disconnect
        c.on_publish = self._on_publish
        c.on_subscribe = self._on_subscribe
        c.on_unsubscribe = self._on_unsubscribe
        c.on_message = self._on_message
        return c

    def open(self) -> Connection:
        """Connect and wait for the CONNACK; any failure is one :class:`LiveError` line."""
        t = self.target
        kw: dict[str, Any] = {"keepalive": self.keepalive}
        if self.protocol == MQTT5:
            from paho.mqtt.packettypes import PacketTypes
            from paho.mqtt.properties import Properties

            props = Properties(PacketTypes.CONNECT)
            props.ReceiveMaximum = 65535
            if self.session_expiry:
                props.SessionExpiryInterval = self.session_expiry
            kw.update(clean_start=self.clean_start, properties=props)
        try:
            self.client.connect(t.host, t.port, **kw)
        except ssl.SSLCertVerificationError as exc:
            raise LiveError(f"{t.display}: TLS handshake failed: {exc.verify_message or _why(exc)}") from None
        except ssl.SSLError as exc:
            raise LiveError(f"{t.display}: TLS handshake failed: {_why(exc)}") from None
        except socket.gaierror as exc:
            raise LiveError(f"{t.display}: cannot resolve {t.host}: {exc.strerror}") from None
        except TimeoutError:
            raise LiveError(f"{t.display}: cannot connect: no answer within {self.timeout:g} s") from None
        except ConnectionRefusedError as exc:
            raise LiveError(f"{t.display}: cannot connect: {exc.strerror or _why(exc)}") from None
        except OSError as exc:
            if t.tls and isinstance(exc, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)):
                # the TCP connection was taken and then dropped: it is the handshake that failed
                raise LiveError(f"{t.display}: TLS handshake failed: {exc.strerror or _why(exc)} "
                                "(is it a TLS listener?)") from None
            raise LiveError(f"{t.display}: cannot connect: {exc.strerror or _why(exc)}") from None
        with contextlib.suppress(OSError, AttributeError):  # paho leaves Nagle on: a barrier behind QoS 0
            # publishes (no answer to carry the ACK) would wait for the peer's delayed ACK, 40 ms each
            self.client.socket().setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client.loop_start()
        self._started = True
        with self.cond:
            if not self.cond.wait_for(lambda: self.connected or self.refused or self.lost, self.timeout):
                self._stop()
                raise LiveError(f"{t.display}: no CONNACK within {self.timeout:g} s (is it an MQTT broker?)")
        if self.refused:
            self._stop()
            hint = " (check the user name and password)" if self.refused in AUTH_REFUSALS else ""
            raise LiveError(f"{t.display}: connection refused: {self.refused}{hint}")
        if not self.connected:
            self._stop()
            hint = "" if t.tls else " (a TLS listener? use mqtts://)"
            raise LiveError(f"{t.display}: no CONNACK: {self.lost}{hint}")
        return self

    # ------------------------------------------------------------ callbacks (network thread)
    def _on_connect(self, _c: Any, _u: Any, flags: Any, rc: Any, props: Any) -> None:
        with self.cond:
            if rc.is_failure:
                self.refused = str(rc)
            else:
                self.connected = True
                self.session_present = bool(getattr(flags, "session_present", False))
                if props is not None:
                    self.receive_maximum = getattr(props, "ReceiveMaximum", 65535)
                    self.maximum_packet_size = getattr(props, "MaximumPacketSize", None)
                    self.maximum_qos = getattr(props, "MaximumQoS", 2)
                    self.retain_available = bool(getattr(props, "RetainAvailable", 1))
            self.cond.notify_all()

    def _on_disconnect(self, _c: Any, _u: Any, _flags: Any, rc: Any, props: Any) -> None:
        with self.cond:
            if not self.leaving and self.lost is None:
                reason = getattr(props, "ReasonString", None) if props is not None else None
                text = str(rc) if rc is not None else "closed"
                if text in ("Unspecified error", "Success", "Normal disconnection", "Protocol error"):
                    text = "the broker closed the connection"
                self.lost = f"{text} ({reason})" if reason else text
            self.connected = False
            self.cond.notify_all()

    def _on_publish(self, _c: Any, _u: Any, mid: int, rc: Any, _props: Any) -> None:
        with self.cond:
            self.acks[mid] = rc
            self.cond.notify_all()

    def _on_subscribe(self, _c: Any, _u: Any, mid: int, rcs: list[Any], _props: Any) -> None:
        with self.cond:
            self.subacks[mid] = list(rcs)
            self.cond.notify_all()

    def _on_unsubscribe(self, _c: Any, _u: Any, mid: int, _rcs: Any, _props: Any) -> None:
        with self.cond:
            self.unsubacks.add(mid)
            self.cond.notify_all()

    def _on_message(self, _c: Any, _u: Any, msg: Any) -> None:
        if self.on_message is not None:
            self.on_message(msg)

    # ------------------------------------------------------------ requests
    def check(self) -> None:
        """Raise the :class:`LiveError` of a lost connection."""
        if self.lost is not None:
            raise LiveError(f"{self.target.display}: connection lost: {self.lost}")

    def publish(self, topic: str, payload: bytes, qos: int, retain: bool, properties: Any = None) -> int:
        """Queue one PUBLISH; its acknowledgement (or, QoS 0, its write) lands in :attr:`acks`."""
        from paho.mqtt.enums import MQTTErrorCode

        self.check()
        try:
            info = self.client.publish(topic, payload, qos, retain, properties)
        except ValueError as exc:  # paho refuses what no broker would take (a plan checks first)
            raise LiveError(f"{self.target.display}: cannot publish to {topic!r}: {exc}") from None
        if info.rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
            self.check()
            raise LiveError(f"{self.target.display}: publish to {topic!r} failed: {_rc_text(info.rc)}")
        return int(info.mid)

    def wait(self, ready: Callable[[], bool], what: str, timeout: float | None = None) -> None:
        """Wait (holding :attr:`cond`) until ``ready()``; a lost connection or the timeout is a LiveError."""
        limit = self.timeout if timeout is None else timeout
        with self.cond:
            ok = self.cond.wait_for(lambda: ready() or self.lost is not None, limit)
            if ready():
                return
        self.check()
        if not ok:
            raise LiveError(f"{self.target.display}: no {what} within {limit:g} s")

    def subscribe(self, items: list[tuple[str, Any]], properties: Any = None) -> list[Any]:
        """SUBSCRIBE ``[(filter, qos or SubscribeOptions)]`` in one packet; the SUBACK's reason codes."""
        self.check()
        rc, mid = self.client.subscribe(items, properties=properties)
        if mid is None:
            self.check()
            raise LiveError(f"{self.target.display}: subscribe failed: {_rc_text(rc)}")
        self.wait(lambda: mid in self.subacks, "SUBACK")
        with self.cond:
            return self.subacks.pop(mid)

    def mark(self) -> int:
        """Send a round trip behind everything sent so far (an UNSUBSCRIBE of a filter nobody uses);
        its mid lands in :attr:`unsubacks` when the broker has handled all of it."""
        self.check()
        rc, mid = self.client.unsubscribe(f"mosqdb/barrier/{uuid.uuid4().hex}")
        if mid is None:
            self.check()
            raise LiveError(f"{self.target.display}: unsubscribe failed: {_rc_text(rc)}")
        return int(mid)

    def barrier(self, timeout: float | None = None) -> None:
        """:meth:`mark`, and wait for it."""
        mid = self.mark()
        self.wait(lambda: mid in self.unsubacks, "UNSUBACK", timeout)
        with self.cond:
            self.unsubacks.discard(mid)

    def ack(self, mid: int, qos: int) -> None:
        """Acknowledge a received message (``manual_ack`` connections)."""
        self.client.ack(mid, qos)

    # ------------------------------------------------------------ the end
    def close(self) -> None:
        """A normal DISCONNECT (the session stays for its expiry interval), then stop the loop."""
        if not self._started:
            return
        self.leaving = True
        if self.connected and self.lost is None:
            with contextlib.suppress(Exception):
                self.client.disconnect()  # the loop writes it, paho closes the socket, the loop ends
        self._stop()

    def _stop(self) -> None:
        self.leaving = True
        if self._started:
            self._started = False
            with contextlib.suppress(Exception):
                self.client.loop_stop()  # joins the network thread (not from inside it)
        with contextlib.suppress(Exception):
            sock = self.client.socket()
            if sock is not None:
                sock.close()

    def __enter__(self) -> Connection:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _why(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason).replace("_", " ").lower()
    return str(exc) or type(exc).__name__


def _rc_text(rc: Any) -> str:
    try:
        import paho.mqtt.client as mqtt

        return str(mqtt.error_string(rc))
    except Exception:  # pragma: no cover
        return str(rc)
