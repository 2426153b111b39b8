"""The topic tree in the inspector: what fills the file by topic level (``t``).

A Textual Tree over :class:`codec.ops.tree.TopicTree`, built in a worker from the file as on disk
(the base the chunk numbers are of), each node opened when it is expanded. Enter on a node filters
the chunk list to ``topic:NODE/#``; ``d`` deletes the retained messages under it — the chunks
``rm-retained 'NODE/#'`` removes — as one undoable edit; ``o`` sorts by size or by name. A node shows
its children :data:`PAGE` at a time, in the order asked, then a "… N more" line whose Enter shows
the next ones: a level of thousands of devices opens as fast as a small one.

Mixed into :class:`~inspector.tui.app.InspectorApp` (:class:`TopicTreeMixin`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len, set_cell_size
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, Static, Tree
from textual.widgets.tree import TreeNode

from codec import CodecError
from codec.values import printable
from inspector.tui.actions import TREE, bindings
from inspector.tui.model.document import Document

HINT = "Enter: filter the list to the node · space/→: open · d: delete its retained messages · o: sort · Esc: close"


NAME = 44
"""Columns of a node's name at the root; each level down the tree's guides take 4 of them."""

PAGE = 500
"""Children a node shows at once (the rest behind a "… N more" line): adding a line to the widget costs
about 0.1 ms, so 2,000 devices under one level took 0.3 s to open."""


@dataclass(frozen=True)
class More:
    """The line after a page of children: ``start`` is the first child not shown yet."""

    parent: Any  # the topic node
    start: int
    left: int


HEADER = f"{'  topic level':<{NAME + 2}}{'share':>7}{'bytes':>15}{'stored':>11}{'retained':>10}{'queued':>10}"


def node_label(tree: Any, node: Any) -> Text:
    """A node's line: its level, then share of the file, bytes, stored, retained and queued in columns
    that line up at every depth (the name's room shrinks as the guides grow)."""
    t = node.total
    name = printable(node.name) if node.depth else "(all topics)"
    if node.depth and node.name == "":
        name = "(empty level)"
    room = max(NAME - 4 * node.depth + (0 if node.has_children else 2), 8)  # (a leaf has no ▶ before it)
    if cell_len(name) > room:
        name = set_cell_size(name, room - 1) + "…"
    name += " " * (room - cell_len(name))  # cells, not characters: CJK and emoji take two
    return Text.assemble((name, "bold" if node.has_children else ""),
                         (f"{100 * tree.share(node):6.1f}%", "cyan"), f"{t.bytes:>15,}", f"{t.stores:>11,}",
                         (f"{t.retained:>10,}", "green" if t.retained else "dim"),
                         (f"{t.queued:>10,}", "yellow" if t.queued else "dim"))


class TopicTreeScreen(ModalScreen[tuple[str, Any] | None]):
    """The topic tree; dismissed with ("filter", node), ("delete", node) or None."""

    BINDINGS = bindings(TREE)

    def __init__(self, tree: Any, sort: str = "size", note: str = "") -> None:
        super().__init__()
        self.topics = tree
        self.sort = sort
        self.note = note
        self.loaded: set[int] = set()  # the nodes whose children are in the widget

    def compose(self) -> ComposeResult:
        with Vertical(classes="modal-box", id="tree-box"):
            yield Label(self.title_line(), id="tree-title")
            yield Static(Text(HEADER, style="bold"), id="tree-header")
            widget: Tree[Any] = Tree(node_label(self.topics, self.topics.root), data=self.topics.root, id="topic-tree")
            widget.auto_expand = False  # Enter filters; space and the arrows open
            yield widget
            yield Static(HINT, id="tree-hint")

    def title_line(self) -> str:
        root = self.topics.root.total
        return (f"topic tree ({'biggest first' if self.sort == 'size' else 'by name'}): {root.stores:,} stored "
                f"messages, {root.retained:,} retained, {root.queued:,} queued references{self.note}")

    def on_mount(self) -> None:
        widget = self.query_one(Tree)
        self.fill(widget.root)
        widget.root.expand()
        widget.focus()

    def fill(self, tnode: TreeNode[Any]) -> None:
        """Put the children of ``tnode``'s topic node under it (computed now if not yet), a page of them."""
        node = tnode.data
        if id(node) in self.loaded:
            return
        self.loaded.add(id(node))
        self.add_page(tnode, node, 0)

    def add_page(self, tnode: TreeNode[Any], node: Any, start: int) -> None:
        """Children ``start`` to ``start + PAGE`` of ``node`` under ``tnode``, and a "… N more" line after them."""
        children = self.topics.children(node, self.sort)
        for child in children[start:start + PAGE]:
            tnode.add(node_label(self.topics, child), data=child, allow_expand=child.has_children)
        left = len(children) - start - PAGE
        if left > 0:
            tnode.add_leaf(Text(f"… {left:,} more (Enter shows the next {min(left, PAGE):,})", style="dim italic"),
                           data=More(node, start + PAGE, left))

    def on_tree_node_expanded(self, event: Tree.NodeExpanded[Any]) -> None:
        event.stop()
        if not isinstance(event.node.data, More):
            self.fill(event.node)

    def on_tree_node_selected(self, event: Tree.NodeSelected[Any]) -> None:
        event.stop()
        more = event.node.data
        if isinstance(more, More):  # the next page in its place
            parent = event.node.parent
            assert parent is not None
            event.node.remove()
            self.add_page(parent, more.parent, more.start)
            return
        self.dismiss(("filter", event.node.data))

    def action_sort(self) -> None:
        """Size first, or by name: the tree is laid out again from the root (nodes already computed stay)."""
        self.sort = "name" if self.sort == "size" else "size"
        widget = self.query_one(Tree)
        widget.clear()
        self.loaded.clear()
        self.fill(widget.root)
        widget.root.expand()
        self.query_one("#tree-title", Label).update(self.title_line())

    def action_delete_node(self) -> None:
        cursor = self.query_one(Tree).cursor_node
        if cursor is not None and cursor.data is not None and not isinstance(cursor.data, More):
            self.dismiss(("delete", cursor.data))

    def action_close(self) -> None:
        self.dismiss(None)


class TopicTreeMixin:
    """The ``t`` action: build the tree in a worker, show it, act on what was chosen."""

    doc: Document
    topic_tree: Any  # (the DbFile it was built from, the TopicTree)
    filter_text: str

    def action_topic_tree(self) -> None:
        if self.doc.db.empty or not self.need_index():
            return
        cached = self.topic_tree
        if cached is not None and cached[0] is self.doc.db:
            self.show_topic_tree(cached[1])
            return
        self.say("reading the topics of the stored messages…")
        self.tree_worker(self.doc.db)

    @work(thread=True, exclusive=True, group="tree")
    def tree_worker(self, db: Any) -> None:
        from codec.ops.tree import build
        from inspector.tui.model.jobs import Cancelled, Progress

        progress = Progress(self, "tree", 1, rate=2)  # (each post lays the screen out again: ~50 ms of CPU)
        try:
            tree = build(db, progress=lambda done, total: progress(done, total))
            if tree.root.has_children:
                tree.children(tree.root)  # the first level, here rather than in the key's handler
        except Cancelled:
            return
        except CodecError as exc:
            self.call_from_thread(self.say, f"topic tree: {exc}", "error")
            return
        finally:
            progress.finish()
        if not progress.cancelled():
            self.call_from_thread(self.tree_built, db, tree)

    def tree_built(self, db: Any, tree: Any) -> None:
        self.topic_tree = (db, tree)
        if db is self.doc.db:
            self.show_topic_tree(tree)

    def show_topic_tree(self, tree: Any) -> None:
        note = " — the file as on disk, unsaved edits not counted" if self.doc.is_dirty() else ""
        self.say("topic tree: Enter filters the list to a node, d deletes its retained messages")
        self.push_screen(TopicTreeScreen(tree, note=note), self.tree_chosen)

    def tree_chosen(self, chosen: tuple[str, Any] | None) -> None:
        if chosen is None:
            return
        what, node = chosen
        if what == "filter":
            if node.depth == 0:
                self.clear_filter()
                self.say("the whole tree: every chunk shown")
                return
            flt = node.filter
            self.apply_filter("topic:" + (shlex.quote(flt) if any(c.isspace() or c in "'\"\\" for c in flt) else flt))
            return
        if not self.editable() or not self.need_index():
            return
        if not node.total.retained:
            self.say(f"no retained message under {node.topic or 'the root'!r}: nothing to delete", "warning")
            return
        self.say(f"finding the retained messages under {node.topic!r}…")
        self.retained_worker(self.doc.db, node)

    @work(thread=True, exclusive=True, group="tree")
    def retained_worker(self, db: Any, node: Any) -> None:
        from codec.ops.tree import retained_under

        cached = self.topic_tree
        if cached is None or cached[0] is not db:
            return
        try:
            items, retained, stores = retained_under(db, cached[1], node)
        except CodecError as exc:
            self.call_from_thread(self.say, f"cannot delete under {node.topic!r}: {exc}", "error")
            return
        self.call_from_thread(self.retained_found, db, node, items.tolist(), retained, stores)

    def retained_found(self, db: Any, node: Any, items: list[int], retained: int, stores: int) -> None:
        if db is not self.doc.db:
            self.say("the file changed (a save): open the tree again", "warning")
            return
        items = [i for i in items if i not in self.doc.overlay.deleted]
        if not items:
            self.say(f"the retained messages under {node.topic!r} are deleted already")
            return
        label = (f"delete the {retained:,} retained message(s) under {node.filter} and the {stores:,} stored "
                 "message(s) no one else references")
        self.doc.delete(items, label)
        self.refresh_after_edit()
        self.say(f"{label} (u: undo)")


__all__ = ["TopicTreeMixin", "TopicTreeScreen", "node_label"]
