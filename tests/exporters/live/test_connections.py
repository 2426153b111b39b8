"""How a live command connects, and every way it cannot: TLS with a certificate made by openssl here,
a password file made by mosquitto_passwd, a port where nothing listens, a server that never answers.
Each failure is one line on stderr naming the target (never its password), exit 1."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from support.brokers import (
    Broker,
    free_port,
    have_mosquitto,
    oracle_mosquitto,
    password_file,
    tls_files,
)
from support.cli import run_in_process
from support.paths import V6

pytestmark = [pytest.mark.broker, pytest.mark.skipif(not have_mosquitto(), reason="mosquitto broker not installed")]

FAST = ("--quiet-period", "0.3")


def one_line(r) -> str:  # type: ignore[no-untyped-def]
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    return r.stderr


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tls_files(tmp_path_factory.mktemp("tls"))


@pytest.mark.parametrize("version", ["debian", "2.1.2"])
def test_tls_and_password(certs: dict[str, Path], tmp_path: Path, version: str) -> None:
    binary = None if version == "debian" else oracle_mosquitto(version)
    if version != "debian" and binary is None:
        pytest.skip(f"the {version} oracle broker cannot be built here")
    pw = password_file(tmp_path, "alice", "s3cret")
    tport = free_port()
    extra = (f"password_file {pw}", "allow_anonymous false",
             f"listener {tport} 127.0.0.1", f"certfile {certs['cert']}", f"keyfile {certs['key']}")
    with Broker(workdir=tmp_path / "b", extra=extra, binary=binary) as b:
        good = f"mqtts://alice:s3cret@127.0.0.1:{tport}"
        r = run_in_process("replay", V6, "--to", good, "--cafile", certs["ca"], "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["sent"]["retained"] > 0
        listed = run_in_process("live", "list", good, "#", "--cafile", certs["ca"], "--json", *FAST)
        assert json.loads(listed.stdout)["retained"] == json.loads(r.stdout)["sent"]["retained"]
        assert run_in_process("live", "list", good, "#", "--insecure", *FAST).returncode == 0
        err = one_line(run_in_process("live", "list", good, "#", "--cafile", certs["other_ca"], *FAST))
        assert "TLS handshake failed" in err and "s3cret" not in err
        err = one_line(run_in_process("live", "list", f"mqtts://alice:s3cret@localhost:{tport}", "#",
                                      "--cafile", certs["ca"], *FAST))
        assert "TLS handshake failed" in err and "localhost" in err  # the certificate names 127.0.0.1 only
        err = one_line(run_in_process("live", "list", f"mqtts://alice:s3cret@127.0.0.1:{b.port}", "#",
                                      "--cafile", certs["ca"], *FAST))
        assert "TLS handshake failed" in err
        err = one_line(run_in_process("live", "list", f"mqtt://alice:nope@127.0.0.1:{b.port}", "#", *FAST))
        assert "connection refused: Not authorized" in err and "nope" not in err
        err = one_line(run_in_process("live", "list", f"mqtt://127.0.0.1:{b.port}", "#", *FAST))
        assert "connection refused" in err
        alice = collect_retained_as(b.port)
    assert alice > 0


def collect_retained_as(port: int) -> int:
    """The retained messages a logged-in plain client sees (the TLS replay reached the same broker)."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    got: set[str] = set()
    done = threading.Event()
    c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="alice-check")
    c.username_pw_set("alice", "s3cret")
    c.on_message = lambda _c, _u, m: got.add(m.topic)
    c.on_connect = lambda cl, *a: cl.subscribe("#", 0)
    c.on_subscribe = lambda *a: threading.Timer(0.3, done.set).start()
    c.connect("127.0.0.1", port)
    c.loop_start()
    done.wait(5)
    c.disconnect()
    c.loop_stop()
    return len(got)


def test_nothing_listening() -> None:
    port = free_port()
    err = one_line(run_in_process("replay", V6, "--to", f"mqtt://127.0.0.1:{port}"))
    assert f"mqtt://127.0.0.1:{port}: cannot connect: Connection refused" in err


def test_a_server_that_never_answers() -> None:
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    held: list[socket.socket] = []
    threading.Thread(target=lambda: held.append(srv.accept()[0]), daemon=True).start()
    try:
        err = one_line(run_in_process("live", "list", f"mqtt://127.0.0.1:{port}", "#", "--timeout", "1"))
        assert "no CONNACK within 1 s" in err
    finally:
        for s in held:
            s.close()
        srv.close()


@pytest.mark.parametrize("url, why", [("http://h", "use mqtt://"), ("mqtt://h:0", "bad port 0"),
                                      ("mqtt://u:pw@h:x", "bad port")])
def test_bad_urls_are_usage_errors(url: str, why: str) -> None:
    r = run_in_process("replay", V6, "--to", url)
    assert r.returncode == 2 and why in r.stderr and ":pw@" not in r.stderr


def test_usage_errors() -> None:
    for args, why in ((("replay", V6, "--to", "mqtt://h", "--client", "x"), "give --sessions"),
                      (("replay", V6, "--to", "mqtt://h", "--topic", "a/#/b"), "not a valid MQTT topic filter"),
                      (("replay", V6, "--to", "mqtt://h", "--cafile", V6), "need an mqtts://"),
                      (("live", "rm-retained", "mqtt://h", "a/+x"), "not a valid MQTT topic filter"),
                      (("live",), "name an action")):
        r = run_in_process(*args)
        assert r.returncode == 2 and why in r.stderr, (args, r.stderr)
