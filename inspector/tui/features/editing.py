"""Editing actions: field and byte edits, delete/restore, inserted chunks, undo and redo.

Mixed into :class:`~inspector.tui.app.InspectorApp`. Every edit goes through its
:class:`~inspector.tui.model.document.Document` (an overlay: nothing is written until a save), then
:meth:`EditingMixin.refresh_after_edit` repaints the list, the details and the summary.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual import work

from codec import CodecError
from codec.values import utf8_or_none
from inspector.tui.messages import HexByteTyped
from inspector.tui.model.document import Document, EditRefused, addable_kind
from inspector.tui.model.sessions import SessionDelete, session_delete
from inspector.tui.screens.prompt import PromptScreen
from inspector.tui.widgets.chunklist import DAMAGE_ROW
from inspector.tui.widgets.fieldtree import FieldTree
from inspector.tui.widgets.summary import SummaryBar


def refusal(attempt: Callable[[str], Any]) -> Callable[[str], str | None]:
    """A prompt's check from a function that raises EditRefused: the reason, or None when it would do."""

    def check(text: str) -> str | None:
        try:
            attempt(text)
        except EditRefused as exc:
            return f"refused: {exc}"
        return None

    return check


class EditingMixin:
    """Edit actions of the inspector app (refused, with a message, on a read-only file)."""

    # the app's state these read and set (InspectorApp.__init__ sets them)
    doc: Document
    item: int | None
    rows_version: int
    generation: int
    topics: dict[int, str | None]
    layout_mode: str

    def action_add_copy(self) -> None:
        if self.item is None or self.item == DAMAGE_ROW or not self.editable() or not self.need_index():
            return
        self.insert_chunk(lambda: self.doc.insert_copy(self.item), "a copy of chunk {anchor} after it")

    def action_add_new(self) -> None:
        if self.item is None or self.item == DAMAGE_ROW or not self.editable() or not self.need_index():
            return
        if self.doc.refused_adds:
            self.say(f"refused: {self.doc.refused_adds}", "warning")
            return
        self.push_screen(PromptScreen("Add a new chunk after this one: which kind?",
                                      placeholder="msg_store, client_msg, retain, sub or client",
                                      hint="numbers start at 0 and text empty: edit the fields next (u: undo)",
                                      check=refusal(addable_kind)), self.do_add_new)

    def do_add_new(self, kind: str | None) -> None:
        if not kind or self.item is None:
            return
        item = self.item
        self.insert_chunk(lambda: self.doc.insert_new(item, kind), "a new " + kind.strip() + " after chunk {anchor}")

    def insert_chunk(self, insert: Callable[[], int], what: str) -> None:
        """Run an insertion, show the new chunk and say what was added (``what`` names ``{anchor}``)."""
        try:
            new = insert()
        except EditRefused as exc:
            self.say(f"refused: {exc}", "error")
            return
        self.refresh_after_edit()
        self.jump(new)
        self.say(f"added {what.replace('{anchor}', str(self.doc.new_anchor[new]))}: edit its fields (u: undo)")

    def new_generation(self) -> None:
        """The chunk numbers changed (a save, an undo or redo past one): the store-id columns are gathered
        again and the filter runs again on the file now shown, keeping the cursor where it was."""
        self.generation = self.doc.generation
        self.columns = None
        self.columns_worker()
        if self.filter_text:
            self.rows_version = self.doc.rows_version
            keep = self.item if self.item is not None and self.item < self.doc.count() else None
            self.apply_filter(self.filter_text, keep=keep)
        else:
            self.rows_version = -1  # sync_rows lays the whole list out again

    def sync_rows(self) -> None:
        """Put inserted chunks among the rows (the unfiltered list only) when they change."""
        if self.rows_version == self.doc.rows_version:
            return
        self.rows_version = self.doc.rows_version
        if self.filter_text:
            return
        keep = self.item
        if keep is not None and keep <= -2 and keep not in self.doc.new_records:
            keep = self.doc.new_anchor.get(keep)  # an undone insertion: back to its neighbour
        rows = self.doc.row_array(self.doc.count())
        self.chunks.set_rows(rows, keep=keep, sorted_rows=rows is None)
        self.item = self.chunks.item(self.chunks.cursor)

    def refresh_after_edit(self) -> None:
        self.topics.clear()  # an edited store may have a new topic for the rows that reference it
        if self.generation != self.doc.generation:
            self.new_generation()
        self.sync_rows()
        self.chunks.refresh()
        self.show_item(keep_cursor=True)
        self.query_one(SummaryBar).refresh_summary(self.doc)
        self.update_verdict_line()  # unsaved edits: the verdict says it is of the file on disk
        self.update_diff_line()

    def editable(self) -> bool:
        if self.doc.read_only:
            self.say("read-only: editing is disabled (reopen without --read-only, or check permissions)", "warning")
            return False
        return True

    def action_edit_field(self) -> None:
        self.flush_detail()
        if self.item is None or self.item == DAMAGE_ROW or not self.editable():
            return
        node = self.fields.cursor_node
        info = node.data if node is not None else None
        if info is None or not info.editable or info.name is None:
            self.say("select a value field in the field tree (lengths and padding follow from values; "
                     "other bytes: type hex digits in the hex view)", "warning")
            self.fields.focus()
            return
        rec = self.doc.record(self.item)
        assert rec is not None
        value = rec.values.get(info.name)
        if isinstance(value, bytes):
            text = utf8_or_none(value)
            if text is not None:
                current, hint = text, "payload as UTF-8 text, or hex:0a0b…, or escapes like \\xff"
            else:
                current, hint = "hex:" + value.hex(), "binary payload: hex:0a0b… or text"
        elif isinstance(value, str):
            current = value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            hint = "UTF-8 text; \\xNN escapes allowed (must stay valid UTF-8)"
        else:
            current = "" if value is None else str(value)
            hint = "an integer (decimal or 0x..)"
        item, name = self.item, info.name
        self.push_screen(PromptScreen(f"{rec.kind}[{item}].{name}", current, hint=hint,
                                      check=refusal(lambda text: self.doc.field_edit(item, name, text))),
                         lambda text: self.do_edit(item, name, text))

    def do_edit(self, item: int, name: str, text: str | None) -> None:
        if text is None:
            return
        try:
            edit = self.doc.set_field(item, name, text)
        except EditRefused as exc:
            self.say(f"refused: {exc}", "error")
            return
        self.refresh_after_edit()
        warning = self.reference_warning(item, name)
        self.say(f"edited {edit.label} (u: undo)" + (f" — warning: {warning}" if warning else ""),
                 "warning" if warning else "information")

    def reference_warning(self, item: int, name: str) -> str | None:
        """Say so when an edited store id leaves references dangling (the edit is kept)."""
        if name != "store_id" or not self.doc.complete():
            return None
        rec = self.doc.record(item)
        if rec is None:
            return None
        cols = self.store_columns()
        sid = rec["store_id"]
        if rec.kind in ("client_msg", "retain") and cols.find_store(sid) is None:
            return f"no msg_store has store id {sid}: the broker drops this {rec.kind} on load"
        if rec.kind == "msg_store" and item >= 0:
            try:
                old = int(self.doc.db.chunk(item).record["store_id"])  # the file's, before the edits
            except CodecError:
                return None
            refs = cols.references(old) if old != sid else 0
            if refs:
                return f"{refs} client_msg/retain chunk(s) still reference store id {old}"
        return None

    def on_field_tree_selected(self, event: FieldTree.Selected) -> None:
        self.action_edit_field()

    def action_edit_bytes(self) -> None:
        """Start byte-edit mode in the hex view (Esc ends it)."""
        self.flush_detail()
        if self.item is None or self.item == DAMAGE_ROW or not self.editable():
            if self.item == DAMAGE_ROW:
                self.say("the bytes after the damage are shown, not edited (mosqdb repair salvages them)", "warning")
            return
        if self.doc.refused_bytes:
            self.say(f"refused: {self.doc.refused_bytes}", "warning")
            return
        if self.layout_mode == "list":
            self.action_layout()  # the hex view is hidden with the list alone: back to three panes
        if self.hex.start_editing():
            self.say("editing bytes: type hex digits over the cursor (a byte must keep the chunk decodable); "
                     "Esc stops")

    def on_hex_byte_typed(self, msg: HexByteTyped) -> None:
        if self._detail_timer is not None:  # the hex view still shows the previous chunk
            return
        if self.item is None or self.item == DAMAGE_ROW or not self.editable():
            return
        try:
            edit = self.doc.set_byte(self.item, msg.pos, msg.value)
        except EditRefused as exc:
            self.say(f"refused: {exc}", "error")
            self.hex.refresh()
            return
        self.refresh_after_edit()
        self.hex.cursor = min(msg.pos + 1, max((self.hex.source.size if self.hex.source else 1) - 1, 0))
        self.say(f"{edit.label} (u: undo)")

    def action_delete(self) -> None:
        if self.item is None or self.item == DAMAGE_ROW or not self.editable():
            return
        item = self.item
        v = self.doc.view(item)
        if v.inserted:
            self.doc.delete([item], f"remove the new {v.kind}")
            self.refresh_after_edit()
            self.say(f"removed the new {v.kind} (u: undo)")
            return
        if v.deleted:
            self.doc.restore(item)
            self.refresh_after_edit()
            self.say(f"restored chunk {item} (u: undo)")
            return
        rec = v.record
        if rec is not None and rec.kind == "client" and item >= 0:
            if not self.need_index():
                return
            self.say(f"finding the subscriptions and queue of {rec['client_id']!r}…")
            self.session_worker(item, rec["client_id"])
            return
        warning = None
        if rec is not None and rec.kind == "msg_store" and self.doc.complete():
            cols = self.store_columns()
            refs = cols.references(rec["store_id"])
            live = refs
            if refs:
                warning = (f"msg_store #{rec['store_id']} is still referenced by {live} client_msg/retain chunk(s); "
                           "the broker drops those references on load")
        label = f"delete {v.kind}[{item}]"
        self.doc.delete([item], label, warning)
        self.refresh_after_edit()
        self.say(f"{label} (u: undo)" + (f" — warning: {warning}" if warning else ""),
                 "warning" if warning else "information")

    @work(thread=True, exclusive=True, group="session")
    def session_worker(self, item: int | None, client_id: str) -> None:
        """The session's chunks and the stores it leaves unreferenced, as ``drop-client`` finds them."""
        try:
            found = session_delete(self.doc, client_id)
        except CodecError as exc:
            self.call_from_thread(self.say, f"cannot delete the session: {exc}", "error")
            return
        if item is not None and item not in found.items:
            found.items = sorted([*found.items, item])
        found.items = [i for i in found.items if i not in self.doc.overlay.deleted]
        if not found.items:
            self.call_from_thread(self.say, f"no chunk of {client_id!r} left to delete", "warning")
            return
        self.call_from_thread(self.session_done, found, client_id)

    def session_done(self, found: SessionDelete, client_id: str) -> None:
        label = (f"delete session {client_id!r} with {found.subs} sub(s), {found.queued} queued message(s) "
                 f"and {found.stores} stored message(s) no one else references")
        try:
            self.doc.delete(found.items, label)
        except EditRefused as exc:
            self.say(str(exc), "error")
            return
        self.refresh_after_edit()
        self.say(f"{label} (u: undo)")

    def action_undo(self) -> None:
        edit = self.doc.undo()
        self.refresh_after_edit()
        self.say(f"undid: {edit.label}" if edit else "nothing to undo")

    def action_redo(self) -> None:
        edit = self.doc.redo()
        self.refresh_after_edit()
        self.say(f"redid: {edit.label}" if edit else "nothing to redo")
