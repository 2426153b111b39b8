"""The sessions view (``s``): one row per client, biggest queue first, and what operators do from there.

Each row is a client as ``stats --by client`` counts it — subscriptions, queued messages out with
their payload bytes, in flight, incoming entries awaiting release, session expiry, bridge or not —
and generated-looking ids are grouped by shape as there (Enter opens a group). From a client row:
``d`` drops the session (the chunks ``drop-client`` removes), ``t`` trims its queue to the newest N
(the chunks ``trim-queue --client ID --keep-newest N`` removes), each one undoable edit; Enter
filters the chunk list to the client. ``o`` sorts by queued bytes, queued count or name.

Mixed into :class:`~inspector.tui.app.InspectorApp` (:class:`SessionsMixin`).
"""

from __future__ import annotations

import shlex
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label, Static

from codec import CodecError
from codec.values import NEVER, printable
from inspector.tui.actions import SESSIONS, bindings
from inspector.tui.model.document import Document
from inspector.tui.model.sessions import SORT_KEYS, SessionRow
from inspector.tui.screens.prompt import PromptScreen

HINT = ("Enter: filter the list to the client (a group: open it) · d: drop the session · t: trim its queue · "
        "o: sort · Esc: close")
COLUMNS = ("client", "session", "subs", "queued", "queued bytes", "in flight", "incoming", "expiry", "bridge")


def expiry_text(expiry: tuple[int | None, int | None], at: float) -> str:
    """When the session expires, as the broker would see it at ``at``."""
    when, interval = expiry
    if interval == NEVER or (interval is not None and when == 0 and interval):
        return "never"
    if not when:
        return "-"
    left = when - at
    if left <= 0:
        return "expired"
    for unit, secs in (("d", 86400), ("h", 3600), ("m", 60)):
        if left >= secs:
            return f"in {left / secs:.1f}{unit}"
    return f"in {int(left)}s"


class SessionsScreen(ModalScreen[tuple[str, Any] | None]):
    """The sessions table; dismissed with ("filter" | "drop" | "trim", client id) or None."""

    LIMIT = 200
    """Rows listed at most (the biggest in the chosen order): a table of 2,000 rows took a second of CPU to
    lay out, 500 half a second; the rest are counted on a last line."""

    BINDINGS = bindings(SESSIONS)

    def __init__(self, rows: list[SessionRow], at: float, note: str = "", sort: str = "queued bytes") -> None:
        super().__init__()
        self.rows = rows
        self.at = at
        self.note = note
        self.sort = sort
        self.opened: set[str] = set()  # groups shown with their members
        self.members: dict[str, list[SessionRow]] = {}
        self.shown: list[SessionRow | None] = []  # the table's rows, in order (None: the "more" line)

    def compose(self) -> ComposeResult:
        with Vertical(classes="modal-box", id="sessions-box"):
            yield Label(self.title_line(), id="sessions-title")
            table: DataTable[Any] = DataTable(id="sessions-table", cursor_type="row", zebra_stripes=True)
            yield table
            yield Static(HINT, id="sessions-hint")

    def title_line(self) -> str:
        clients = sum(len(r.members) if r.is_group else 1 for r in self.rows)
        groups = sum(1 for r in self.rows if r.is_group)
        queued = sum(r.queued for r in self.rows)
        return (f"sessions by {self.sort}: {clients:,} client ids ({groups:,} group(s) of generated ids), "
                f"{queued:,} queued{self.note}")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        widest = max((len(r.name) + (14 if r.is_group else 0) for r in self.rows), default=6)
        for name, width in zip(COLUMNS, (min(max(widest, 6), 40), 7, 6, 9, 13, 9, 8, 10, 10), strict=True):
            # widths given: the table measures no cell (2,000 rows of 9 cells took a second to measure)
            table.add_column(name, key=name, width=max(width, len(name)))
        self.fill()
        table.focus()

    def fill(self) -> None:
        table = self.query_one(DataTable)
        keep = table.cursor_row
        table.clear()
        self.shown = []
        key = SORT_KEYS[self.sort]
        ordered = sorted(self.rows, key=key)
        for row in ordered[:self.LIMIT]:
            self.add(table, row, 0)
            if row.is_group and row.name in self.opened:
                members = sorted(self.members.get(row.name, []), key=key)
                for member in members[:self.LIMIT]:
                    self.add(table, member, 1)
                if len(members) > self.LIMIT:
                    self.more(table, len(members) - self.LIMIT, "ids of the group")
        if len(ordered) > self.LIMIT:
            self.more(table, len(ordered) - self.LIMIT, "rows")
        if self.shown:
            table.move_cursor(row=min(keep, len(self.shown) - 1))

    def add(self, table: DataTable[Any], row: SessionRow, indent: int) -> None:
        if row.is_group:
            mark = "▾ " if row.name in self.opened else "▸ "
            name = Text.assemble(mark, (printable(row.name), "bold"), (f"  ({len(row.members or []):,} ids)", "dim"))
            session = f"{row.session:,}"
        else:
            name = Text("  " * indent + printable(row.name))
            session = "yes" if row.session else "no"
        numbers = [Text(f"{v:,}", justify="right") for v in (row.subscriptions, row.queued, row.queued_bytes,
                                                              row.in_flight, row.incoming)]
        table.add_row(name, session, *numbers, "" if row.is_group else expiry_text(row.expiry, self.at),
                      row.bridge or "")
        self.shown.append(row)

    def more(self, table: DataTable[Any], n: int, what: str) -> None:
        """A last line for what is not listed (``o`` sorts otherwise; stats --by client --top lists all)."""
        table.add_row(Text(f"… {n:,} more {what} (o: another order; all: mosqdb stats --by client --top N)", style="dim"),
                      *[""] * (len(COLUMNS) - 1))
        self.shown.append(None)  # type: ignore[arg-type]

    def current(self) -> SessionRow | None:
        table = self.query_one(DataTable)
        k = table.cursor_row
        return self.shown[k] if 0 <= k < len(self.shown) else None

    def set_members(self, groups: dict[str, list[SessionRow]]) -> None:
        self.members = groups

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        row = self.current()
        if row is None:
            return
        if row.is_group:
            self.opened ^= {row.name}
            self.fill()
            return
        self.dismiss(("filter", row.name))

    def action_sort(self) -> None:
        names = list(SORT_KEYS)
        self.sort = names[(names.index(self.sort) + 1) % len(names)]
        self.fill()
        self.query_one("#sessions-title", Label).update(self.title_line())

    def action_choose(self, what: str) -> None:
        row = self.current()
        if row is None:
            return
        if row.is_group:
            self.app.notify(f"{row.name} is a group of {len(row.members or []):,} generated ids: open it (Enter) "
                            "and choose one, or use mosqdb prune-sessions", severity="warning", markup=False)
            return
        self.dismiss((what, row.name))

    def action_close(self) -> None:
        self.dismiss(None)


def exact_client(client_id: str) -> str:
    """``client_id`` as a trim-queue ``--client`` pattern matching only itself (glob characters escaped)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in client_id) if any(c in "*?[" for c in client_id) \
        else client_id


class SessionsMixin:
    """The ``s`` action: the sessions view from a worker, and its drop and trim edits."""

    doc: Document
    at: float
    sessions_cache: Any  # (the DbFile they were read from, rows, groups)

    def action_sessions(self) -> None:
        if self.doc.db.empty or not self.need_index():
            return
        cached = self.sessions_cache
        if cached is not None and cached[0] is self.doc.db:
            self.show_sessions(cached[1], cached[2])
            return
        self.say("reading the sessions…")
        self.sessions_worker(self.doc.db)

    @work(thread=True, exclusive=True, group="sessions")
    def sessions_worker(self, db: Any) -> None:
        from inspector.tui.model.sessions import session_rows

        try:
            rows, groups = session_rows(db, self.at)
        except CodecError as exc:
            self.call_from_thread(self.say, f"sessions: {exc}", "error")
            return
        self.call_from_thread(self.sessions_read, db, rows, groups)

    def sessions_read(self, db: Any, rows: list[SessionRow], groups: dict[str, list[SessionRow]]) -> None:
        self.sessions_cache = (db, rows, groups)
        if db is self.doc.db:
            self.show_sessions(rows, groups)

    def show_sessions(self, rows: list[SessionRow], groups: dict[str, list[SessionRow]]) -> None:
        note = " — the file as on disk, unsaved edits not counted" if self.doc.is_dirty() else ""
        screen = SessionsScreen(rows, self.at, note)
        screen.set_members(groups)
        self.say("sessions: d drops a session, t trims its queue, Enter filters the list to a client")
        self.push_screen(screen, self.session_chosen)

    def session_chosen(self, chosen: tuple[str, str] | None) -> None:
        if chosen is None:
            return
        what, client_id = chosen
        if what == "filter":
            self.apply_filter(f"client:{shlex.quote(client_id)}")
            return
        if not self.editable() or not self.need_index():
            return
        if what == "drop":
            self.say(f"finding the subscriptions and queue of {client_id!r}…")
            self.session_worker(None, client_id)
            return
        if self.doc.refused_trim:
            self.say(self.doc.refused_trim, "warning")
            return
        self.push_screen(PromptScreen(f"Trim the queue of {printable(client_id)}: keep the newest how many?", "0",
                                      hint="0 empties it; in-flight messages are kept (as trim-queue --client "
                                           "ID --keep-newest N)", check=count_refused),
                         lambda text: self.trim_asked(client_id, text))

    def trim_asked(self, client_id: str, text: str | None) -> None:
        if text is None or count_refused(text) is not None:
            return
        self.say(f"trimming the queue of {client_id!r}…")
        self.trim_worker(self.doc.db, client_id, int(text.strip()))

    @work(thread=True, exclusive=True, group="sessions")
    def trim_worker(self, db: Any, client_id: str, keep: int) -> None:
        from codec.ops.trim import TrimRules, trim_chunks

        try:
            drop, rep = trim_chunks(db, TrimRules(clients=(exact_client(client_id),), keep_newest=keep))
        except CodecError as exc:
            self.call_from_thread(self.say, f"cannot trim the queue of {client_id!r}: {exc}", "error")
            return
        items = [] if drop is None else drop.nonzero()[0].tolist()
        self.call_from_thread(self.trim_found, db, client_id, keep, items, rep.client_msgs, rep.stores,
                              dict(rep.skipped))

    def trim_found(self, db: Any, client_id: str, keep: int, items: list[int], msgs: int, stores: int,
                   skipped: dict[str, str]) -> None:
        if db is not self.doc.db:
            self.say("the file changed (a save): open the sessions view again", "warning")
            return
        if skipped:
            self.say(f"not trimmed: {client_id!r} {skipped.get(client_id, 'is left alone')}", "warning")
            return
        items = [i for i in items if i not in self.doc.overlay.deleted]
        if not items:
            self.say(f"nothing to trim: {client_id!r} has at most {keep} queued message(s) to cut "
                     "(in-flight ones are kept)")
            return
        label = (f"trim the queue of {client_id!r} to its newest {keep}: {msgs:,} queued message(s) and "
                 f"{stores:,} stored message(s) no one else references")
        self.doc.delete(items, label)
        self.refresh_after_edit()
        self.say(f"{label} (u: undo)")


def count_refused(text: str) -> str | None:
    """Why a count prompt refuses ``text`` (not a whole number of 0 or more), or None."""
    try:
        value = int(text.strip())
    except ValueError:
        return f"{text.strip()!r} is not a whole number"
    return "0 or more" if value < 0 else None


__all__ = ["SessionsMixin", "SessionsScreen", "count_refused", "exact_client", "expiry_text"]
