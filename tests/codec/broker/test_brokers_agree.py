"""Five real brokers against the model: for every real file and every hand-made variant, Debian's 2.0.11
and upstream 2.0.14, 2.0.18, 2.0.22 and 2.1.2 each start on it, and each does what `check --broker`
predicts: the same verdict (exit status and the lines printed), the same sessions (a reconnecting
paho client finds its session or not), the same number of queued messages per client, the same
retained topics. The five run side by side (threads) for each file.

Variants are made from the real files with times relative to the real now (± one day), because a
live broker expires by its own clock; what lies within a minute and a half of an expiry is left
out (support/observe.py), so no assertion depends on the date.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from codec.broker.conf import read_conf

from support.brokers import have_mosquitto
from support.observe import CASES, V2022, compare, five, observe, place, predictions  # noqa: F401  (five: a fixture)
from support.variants import make

pytestmark = [pytest.mark.broker, pytest.mark.skipif(not have_mosquitto(), reason="mosquitto not installed")]


def run_five(versions: tuple[str, ...], src: Path, tmp: Path) -> None:
    def one(version: str) -> None:
        db = place(src, tmp / version)
        pred, lo, hi = predictions(version, db)
        compare(observe(version, tmp / version, pred), pred, lo, hi)

    with ThreadPoolExecutor(max_workers=len(versions)) as pool:
        for f in [pool.submit(one, v) for v in versions]:
            f.result()


@pytest.mark.parametrize(("source", "variant"), CASES)
def test_five_brokers_do_what_the_model_predicts(five: tuple[str, ...], tmp_path: Path, source: Path,  # noqa: F811
                                                  variant: str | None) -> None:
    # about now: a live broker judges expiry by its own clock, so variants are made around the real now
    src = source if variant is None else make(variant, source, tmp_path / "variant.db", time.time())
    run_five(five, src, tmp_path)


@pytest.mark.parametrize(("variant", "extra", "qos0", "max_queued"), [
    pytest.param("sessions-alive", (), False, 1000, id="queue_qos0_messages-false"),
    pytest.param("sessions-alive", (), True, 2, id="max_queued_messages-2"),
    pytest.param("never-session-dated", ("persistent_client_expiration 1h",), True, 1000,
                 id="persistent_client_expiration"),
    pytest.param("never-session-dated", (), True, 1000, id="never-expiring-without-global-expiry"),
])
def test_configuration_settings(five: tuple[str, ...], tmp_path: Path, variant: str,  # noqa: F811
                                extra: tuple[str, ...], qos0: bool, max_queued: int) -> None:
    """The model reads the broker's own mosquitto.conf: queue limits drop nothing that was restored (measured);
    persistent_client_expiration puts never-expiring sessions on 2.0.15+'s expiry list."""
    src = make(variant, V2022, tmp_path / "variant.db", time.time())  # about now: the brokers judge expiry by their clock
    conf = tmp_path / "settings.conf"
    conf.write_text("persistence true\n" + "".join(f"{line}\n" for line in extra)
                    + f"queue_qos0_messages {'true' if qos0 else 'false'}\nmax_queued_messages {max_queued}\n")
    settings = read_conf(conf)

    def one(version: str) -> None:
        db = place(src, tmp_path / version)
        pred, lo, hi = predictions(version, db, settings)
        compare(observe(version, tmp_path / version, pred, extra=extra, queue_qos0=qos0, max_queued=max_queued),
                pred, lo, hi)

    with ThreadPoolExecutor(max_workers=len(five)) as pool:
        for f in [pool.submit(one, v) for v in five]:
            f.result()
