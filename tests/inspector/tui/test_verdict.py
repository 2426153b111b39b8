"""The broker verdict in the inspector: a header line for a chosen Mosquitto release
and the check panel graded for it, computed in a worker (a child process on big files).

Every expectation is the broker model's own answer for the same file (``codec.broker.verdict_for``),
so these tests check what the TUI shows of it; the model itself is tested against five real brokers
in tests/codec/broker. Files are hand-made variants of a real one, made at a fixed time.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from textual.pilot import Pilot

from codec import DbFile
from codec.broker import verdict_for
from inspector.tui.screens.check import CheckScreen

from support.cli import run_in_process
from support.clock import AT
from support.paths import INCOMING, V6
from support.tui import keys, make_app, running, settle, status, type_text, until
from support.variants import make

V2022 = INCOMING / "2.0.22-a.db"


def header(app) -> str:  # type: ignore[no-untyped-def]
    return str(app.query_one("#summary").render())


def model(path: Path, release: str) -> object:
    with DbFile(path) as db:
        for _ in db.scan_steps():
            pass
        return verdict_for(db, release, at=AT, topics=False)


async def choose(pilot: Pilot, release: str) -> None:
    """b, the release, Enter; then wait for the model."""
    await keys(pilot, "b")
    await pilot.press("ctrl+u")
    await type_text(pilot, release)
    await keys(pilot, "enter")
    await settle(pilot)


@pytest.mark.parametrize("where", ["thread", "process"])
async def test_header_shows_what_the_release_keeps_and_drops(v6_copy: Path, where: str) -> None:
    """2.0.20-a at AT: two sessions expired. The line counts sessions, drops (with the reason), queue, retained."""
    pred = model(v6_copy, "2.0.18")
    assert pred.verdict == "loads" and {d.rule for d in pred.dropped} == {"expired-session"}
    app = make_app(v6_copy)
    app.broker = "2.0.18"
    app.check_process_from = 0 if where == "process" else None
    async with app.run_test(size=(140, 30)) as pilot:
        await settle(pilot)
        await until(pilot, lambda: app.verdict is not None, "the verdict")
        await settle(pilot)
        line = header(app).splitlines()[2]
        assert line.startswith(f"Mosquitto 2.0.18: loads — {len(pred.kept)} sessions kept, "
                               f"{len(pred.dropped)} dropped (expired), {sum(pred.queued.values())} queued, "
                               f"{pred.retained_count} retained"), line
        assert "Mosquitto 2.0.18 loads" in status(app)


async def test_check_panel_is_graded_for_the_release(v6_copy: Path) -> None:
    """c with a release chosen: the verdict and its log lines head the panel, and the findings are the
    model's for that release (each dropped session named with its reason)."""
    pred = model(v6_copy, "2.0.18")
    app = make_app(v6_copy)
    app.broker = "2.0.18"
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await keys(pilot, "c")
        panel = app.screen
        assert isinstance(panel, CheckScreen)
        await until(pilot, lambda: not panel.running, "the check ended")
        assert panel.title_line().startswith("check for Mosquitto 2.0.18:")
        head = str(panel.query_one("#check-verdict").render())
        assert head.startswith("Mosquitto 2.0.18: loads —") and all(f"log: {line}" in head for line in pred.log[:2])
        dropped = [f for f in panel.findings if f.rule == "broker:expired-session"]
        assert sorted(f.message for f in dropped) == sorted(
            f"Mosquitto 2.0.18 drops the session of {d.client_id!r}: {d.reason}" for d in pred.dropped)
        assert not any(f.rule == "expired" for f in panel.findings)  # the plain expiry warnings give way
    plain = make_app(v6_copy)  # without a release: the plain checker's findings, as before
    async with plain.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await keys(pilot, "c")
        await until(pilot, lambda: not plain.screen.running, "the plain check ended")
        assert plain.screen.title_line().startswith("check: ")
        assert not any(f.rule.startswith("broker:") for f in plain.screen.findings)
        assert any(f.rule == "expired" for f in plain.screen.findings)


async def test_releases_disagree_on_a_sub_without_client_id(tmp_path: Path) -> None:
    """The issue's measured case: 2.0.18 aborts on a SUB chunk with an empty client id, 2.0.22 loads it.
    b switches the release; the crash names what the broker asserts; empty input hides the line."""
    bad = make("sub-without-client-id", V2022, tmp_path / "bad.db", AT)
    crash, fine = model(bad, "2.0.18"), model(bad, "2.0.22")
    assert crash.verdict == "crashes" and fine.verdict == "loads"
    async with running(bad, size=(160, 30)) as pilot:
        app = pilot.app
        assert len(header(app).splitlines()) == 2
        await choose(pilot, "2.0.18")
        await until(pilot, lambda: app.verdict is not None, "the 2.0.18 verdict")
        line = header(app).splitlines()[2]
        first = next(x for x in crash.stop.log if x.strip())
        assert line.startswith(f"Mosquitto 2.0.18: crashes while loading — {first}"), line
        assert "crashes" in status(app)
        await choose(pilot, "2.0.22")
        await until(pilot, lambda: app.verdict is not None and app.verdict.broker == "2.0.22", "the 2.0.22 verdict")
        assert header(app).splitlines()[2].startswith(f"Mosquitto 2.0.22: loads — {len(fine.kept)} sessions kept")
        await choose(pilot, "")
        assert len(header(app).splitlines()) == 2 and app.broker is None and "hidden" in status(app)


async def test_refusal_shows_the_log_line_and_auto_names_the_release(tmp_path: Path) -> None:
    bad = make("truncated-chunk", V2022, tmp_path / "cut.db", AT)
    pred = model(bad, "auto")
    assert pred.verdict == "refuses" and pred.broker == "2.0.22"
    app = make_app(bad)
    app.broker = "auto"
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot)
        await until(pilot, lambda: app.verdict is not None, "the verdict")
        first = next(x for x in pred.stop.log if x.strip())
        line = next(x for x in header(app).splitlines() if x.startswith("Mosquitto"))
        assert line.startswith(f"Mosquitto 2.0.22 (auto): refuses — {first}"), line


async def test_unknown_release_is_refused_and_changes_nothing(v6_copy: Path) -> None:
    async with running(v6_copy, size=(120, 30)) as pilot:
        app = pilot.app
        await choose(pilot, "2.2.9")
        assert app.broker is None and len(header(app).splitlines()) == 2
        assert "not a release the broker model knows" in status(app)


async def test_save_recomputes_and_unsaved_edits_are_named(tmp_path: Path) -> None:
    """Delete the SUB chunk 2.0.18 crashes on: the line says it is of the file on disk until the save,
    then the model runs on the saved file and the verdict becomes loads."""
    bad = make("sub-without-client-id", V2022, tmp_path / "bad.db", AT)
    app = make_app(bad)
    app.broker = "2.0.18"
    async with app.run_test(size=(200, 30)) as pilot:
        await settle(pilot)
        await until(pilot, lambda: app.verdict is not None, "the verdict")
        assert app.verdict.verdict == "crashes"
        sub = app.verdict.stop.pos
        app.jump(sub)
        await keys(pilot, "d")
        assert "unsaved edits not included" in header(app)
        await keys(pilot, "ctrl+s")
        await until(pilot, lambda: app.verdict is not None, "the verdict of the saved file")
        assert app.verdict.verdict == "loads"
        assert "Mosquitto 2.0.18: loads" in header(app) and "unsaved" not in header(app)
    assert model(bad, "2.0.18").verdict == "loads"


async def test_the_model_runs_in_a_worker_and_esc_stops_it(v6_copy: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """While the model works (paced here, as on a big file), keys move the list and the job bar shows
    its steps; Esc stops it and the line says so; b starts it again."""
    import codec.broker as broker

    real = broker.verdict_for

    def paced(db, version, *, progress=None, **kw):  # type: ignore[no-untyped-def]
        def slow(done: int, total: int) -> None:
            time.sleep(0.3)
            progress(done, total)
        return real(db, version, progress=slow, **kw)

    monkeypatch.setattr(broker, "verdict_for", paced)
    app = make_app(v6_copy)
    app.broker = "2.0.18"
    app.check_process_from = None
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.jobs.get("broker") is not None and app.jobs["broker"].done > 0,
                    "the model reported a step")
        before = app.chunks.cursor
        await pilot.press("down", "down")
        await pilot.pause()
        assert app.chunks.cursor == before + 2 and app.verdict is None  # keys answered while it works
        assert "predicting" in header(app)
        await pilot.press("escape")
        await settle(pilot)
        assert app.verdict is None and "verdict stopped — b computes it again" in header(app)
        assert "broker cancelled" in status(app)
        monkeypatch.setattr(broker, "verdict_for", real)
        await choose(pilot, "2.0.18")
        await until(pilot, lambda: app.verdict is not None, "the verdict")


def test_cli_refuses_an_unknown_release_and_a_conf_alone(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    shutil.copyfile(V6, db)
    r = run_in_process("inspect", db, "--broker", "3.0.0")
    assert r.returncode == 2 and "3.0.0" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    conf = tmp_path / "mosquitto.conf"
    conf.write_text("persistence true\n")
    r = run_in_process("inspect", db, "--conf", conf)
    assert r.returncode == 2 and "--broker" in r.stderr
    r = run_in_process("inspect", db, "--broker", "auto", "--conf", tmp_path / "missing.conf")
    assert r.returncode == 2 and "missing.conf" in r.stderr
