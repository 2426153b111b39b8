"""The inspector's keys, once: one table drives every binding (the App's, each pane's and each modal's),
the footer, the help screen and the command palette (the Harlequin and Posting way), so they cannot
drift apart.

Each :class:`Action` names the widget it is bound on, its ``target`` (as Harlequin's actions do): None
is the App, whose ``action_<name>`` runs whatever pane has the focus; a pane (:data:`PANES`) or a modal
(:data:`MODALS`) binds the entries that name it in its own ``BINDINGS`` (``bindings(target)``), so its
keys work only while it has the focus. An App entry without a name is a key a widget handles (arrows,
Tab, hex digits while editing bytes, Enter in the filter bar); it is listed in the help and may be
shown in the footer.

The footer (:class:`~inspector.tui.widgets.keybar.KeyBar`) shows what the keys do *in the focused
pane*: the entries whose ``panes`` name it (or that name none: every pane), by ``footer`` rank, as
many as fit; Save, Undo and Help rank first, so they stay at 80 columns. Help lines are laid out
from the table: an entry whose ``help`` is None adds its keys to the line above (``/  n``), one
marked ``beside`` takes the second column of it; entries of no help group are footer-only.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from textual.binding import Binding
from textual.markup import escape


@dataclass(frozen=True)
class Action:
    """One key (or a few) and what it does, as every place that shows it needs it."""

    name: str | None
    """The App's ``action_<name>``; None: a key a pane handles itself (listed, not bound)."""
    keys: str
    """Textual key names, comma-separated (``u,ctrl+z``); for an unbound entry, the text shown."""
    group: str
    """The help screen section (a key of :data:`GROUPS`); "": footer only."""
    help: str | None
    """The help screen text (lines after the first are indented under it); None: on the line above."""
    label: str = ""
    """Short name in the footer."""
    title: str = ""
    """Command palette title."""
    description: str = ""
    """Command palette help line."""
    footer: int = 0
    """Footer rank, 1 = first (shown first, dropped last); 0: never in the footer."""
    panes: tuple[str, ...] = ()
    """Panes whose footer shows it (:data:`PANES`); empty: every pane."""
    beside: bool = False
    """Help: in the second column of the line above."""
    writes: bool = False
    """Edits the document, so refused on a read-only file (the palette says so)."""
    target: str | None = None
    """Where the key is bound: None the App; a pane of :data:`PANES` or a modal of :data:`MODALS` (then
    ``name`` is that widget's action, arguments included: ``move(-1)``)."""
    show: bool = False
    """Textual's ``show`` of the binding (the modals' own keys keep Textual's default, shown)."""


LIST, FIELDS, HEX, BYTES, FILTER = "list", "fields", "hex", "bytes", "filter"
PANES = {LIST: "chunk list", FIELDS: "fields", HEX: "hex", BYTES: "editing bytes", FILTER: "filter bar"}
"""Where the focus can be, as the footer and the mode line name it (BYTES: the hex view in edit mode)."""

PROMPT, CONFIRM_QUIT, CONFIRM_SAVE, HELP_SCREEN, CHECK, DIFF_LIST, SESSIONS, TREE = (
    "prompt", "confirm-quit", "confirm-save", "help", "check", "diff-list", "sessions", "tree")
MODALS = (PROMPT, CONFIRM_QUIT, CONFIRM_SAVE, HELP_SCREEN, CHECK, DIFF_LIST, SESSIONS, TREE)
"""The modal screens whose keys the table holds."""

NAV, EDIT, OTHER = "Navigation", "Editing", "Other"
GROUPS = {NAV: "", EDIT: " (an overlay: nothing is written until you save)", OTHER: ""}
"""Help sections in order, with what follows the bold heading."""

CHUNK = (LIST, FIELDS, HEX)  # the panes that act on the selected chunk


def bound(target: str, keys: str, action: str, label: str = "", *, show: bool = False) -> Action:
    """A key that ``target`` (a pane or a modal) binds itself: not in the help, the footer or the palette."""
    return Action(action, keys, "", None, label, target=target, show=show)


def paging(target: str, home: str, end: str, labels: tuple[str, ...] = ("", "", "", "")) -> tuple[Action, ...]:
    """A scrolling pane's PgUp, PgDn, Home and End: a page either way (its ``page``), then its ends."""
    keys = (("pageup", "page(-1)"), ("pagedown", "page(1)"), ("home", home), ("end", end))
    return tuple(bound(target, k, a, label) for (k, a), label in zip(keys, labels))


TABLE: tuple[Action, ...] = (
    Action(None, "↑↓ PgUp PgDn", NAV, "move in the focused pane (mouse: click, wheel)"),
    Action(None, "tab", NAV, "next pane: chunk list → fields → hex", "Pane", footer=9, panes=CHUNK),
    Action("goto", "g", NAV, "go to: 123 chunk, 0x1f / @31 offset, #12 store id", "Goto", "Go to",
           "Jump to a chunk index, file offset (0x.., @..) or store id (#..)", footer=10, panes=CHUNK),
    Action("filter", "f", NAV, "filter: type:retain topic:a/+/# client:ID store:1-9;\n"
                               "a bare word: topics starting with it", "Filter", "Filter",
           "Filter by type, topic (filter or prefix), client id, store id", footer=5, panes=CHUNK),
    Action("search", "slash", NAV, "search topic, client id, payload; next match", "Search", "Search",
           "Find text in topics, client ids and payloads", footer=11, panes=CHUNK),
    Action("search_next", "n", NAV, None, "Next", "Search next", "Repeat the last search"),
    Action("clear_filter", "escape", NAV, None, "Clear", "Clear filter",
           "Stop a running filter, search, check or export; show every chunk again"),
    Action("follow", "r", NAV, "follow: client_msg/retain → msg_store → referrers", "Ref", "Follow reference",
           "client_msg/retain → msg_store; msg_store → everything referencing it", footer=8, panes=(LIST, FIELDS)),
    Action("check", "c", NAV, "check the file; Enter on a finding jumps to it", "Check", "Check file",
           "Run the integrity rules and list findings", footer=12, panes=(LIST,)),
    Action("broker", "b", NAV, "broker verdict: what a Mosquitto release (2.0.18, auto)\n"
                               "does with the file; c then grades findings for it", "Broker", "Broker verdict",
           "Pick a Mosquitto release: the header says whether it loads, refuses or crashes on the file",
           footer=17, panes=(LIST,)),
    Action("diff", "v", NAV, "compare with another file: rows it lacks +, rows it\n"
                             "holds otherwise ~ (the content diff)", "Diff", "Compare with a file",
           "Mark the rows that differ from a second file (mosqdb diff by content)", footer=18, panes=(LIST,)),
    Action("diff_list", "V", NAV, "what differs: what only the other file holds, the\n"
                                  "marked rows (Enter jumps)", "Diff list", "List differences",
           "List what only the other file holds, and this file's added and changed rows"),
    Action("topic_tree", "t", NAV, "topic tree: what fills the file by topic level; Enter\n"
                                   "filters to a node, d deletes its retained messages", "Tree", "Topic tree",
           "Stored, retained and queued messages and bytes per topic level; filter to a node or delete its "
           "retained messages", footer=19, panes=(LIST,)),
    Action("sessions", "s", NAV, "sessions: one row per client, biggest queue first;\n"
                                 "d drops a session, t trims its queue", "Sessions", "Sessions",
           "Subscriptions, queued messages and bytes, expiry and bridges per client; drop a session or trim "
           "its queue", footer=20, panes=(LIST,)),
    Action("layout", "w", NAV, "layout: a wider chunk list, the list alone, back", "Layout", "Change layout",
           "Widen the chunk list (for long topics), show it alone, or go back to three panes",
           footer=13, panes=(LIST,)),
    Action("export", "x", NAV, "export the filtered chunks (.jsonl or Parquet dir)", "Export", "Export selection",
           "Write the filtered chunks as JSON lines (.jsonl) or a Parquet dataset (directory)"),
    Action("edit_field", "e", EDIT, "edit the selected field (text, 0x.., hex:..)", "Edit", "Edit field",
           "Edit the selected field's value", footer=6, panes=(FIELDS,), writes=True),
    Action(None, "enter", EDIT, None),  # the field tree's select edits too
    Action("edit_bytes", "i", EDIT, "edit bytes in the hex view: type hex digits over\n"
                                    "the cursor (must decode); Esc stops", "Edit bytes", "Edit bytes",
           "Overwrite bytes of the chunk in the hex view (Esc stops)", footer=6, panes=(HEX,), writes=True),
    Action(None, "0-9 a-f", "", None, "type a byte", footer=5, panes=(BYTES,)),
    Action(None, "escape", "", None, "Done", footer=6, panes=(BYTES,)),
    Action(None, "enter", "", None, "Apply", footer=5, panes=(FILTER,)),
    Action(None, "escape", "", None, "Clear", footer=6, panes=(FILTER,)),
    Action("delete", "d", EDIT, "delete chunk / restore (a client: with its subs, queue\n"
                                "and the stored messages no one else references)", "Delete",
           "Delete chunk", "Delete (or restore) the chunk; a client with its subs, queue and unreferenced stores",
           footer=7, panes=(LIST,), writes=True),
    Action("add_copy", "a", EDIT, "add a copy / a blank chunk after it, then edit", "Add copy", "Add a copy",
           "Insert a copy of the chunk after it, to edit into a new one", footer=14, panes=(LIST,), writes=True),
    Action("add_new", "A", EDIT, None, "Add new", "Add a new chunk",
           "Insert a blank msg_store, client_msg, retain, sub or client after the chunk", footer=15, panes=(LIST,),
           writes=True),
    Action("undo", "u,ctrl+z", EDIT, "undo", "Undo", "Undo", "Undo the last edit", footer=2),
    Action("redo", "U,ctrl+y", EDIT, "redo", "Redo", "Redo", "Redo the last undone edit", beside=True),
    Action("save", "ctrl+s", EDIT, "save atomically (asks first if the\nchecker finds new errors)", "Save", "Save",
           "Save atomically over the file", footer=1, writes=True),
    Action("save_as", "S", EDIT, "save as", "Save as", "Save as", "Save to another file", beside=True),
    Action(None, "ctrl+p", OTHER, "command palette with every action and its key", "Commands", footer=16,
           panes=(LIST,)),
    Action("help", "question_mark", OTHER, "this help", "Help", "Help", "List keys", footer=3),
    Action("quit_app", "q", OTHER, "quit (asks if edits are unsaved)", "Quit", "Quit",
           "Quit (asks when edits are unsaved)", footer=4, panes=CHUNK, beside=True),
    # the keys the panes and modals bind themselves, each on its target (the App's entries above list the
    # panes' arrows for people: ↑↓ PgUp PgDn)
    bound(LIST, "up,k", "move(-1)", "Up"),
    bound(LIST, "down,j", "move(1)", "Down"),
    *paging(LIST, "jump(0)", "jump(-1)", ("PgUp", "PgDn", "Top", "End")),
    bound(FIELDS, "up", "move(-1)"),
    bound(FIELDS, "down", "move(1)"),
    *paging(FIELDS, "edge(0)", "edge(1)"),
    bound(FIELDS, "enter", "select", "Edit field"),
    bound(HEX, "left", "move(-1)"),
    bound(HEX, "right", "move(1)"),
    bound(HEX, "up", "move_row(-1)"),
    bound(HEX, "down", "move_row(1)"),
    *paging(HEX, "edge(0)", "edge(1)"),
    bound(PROMPT, "escape", "cancel", "Cancel", show=True),
    bound(CONFIRM_QUIT, "s", "choose('save')", "Save", show=True),
    bound(CONFIRM_QUIT, "d", "choose('discard')", "Discard", show=True),
    bound(CONFIRM_QUIT, "escape,c", "choose(None)", "Cancel", show=True),
    bound(CONFIRM_SAVE, "s", "choose(True)", "Save anyway", show=True),
    bound(CONFIRM_SAVE, "escape,c", "choose(False)", "Cancel", show=True),
    bound(HELP_SCREEN, "escape,q,question_mark", "close", "Close", show=True),
    bound(CHECK, "escape,q", "close", "Close", show=True),
    bound(DIFF_LIST, "escape,q,V", "close", "Close", show=True),
    bound(SESSIONS, "escape,q", "close", "Close", show=True),
    bound(SESSIONS, "o", "sort", "Sort", show=True),
    bound(SESSIONS, "d,delete", "choose('drop')", "Drop session", show=True),
    bound(SESSIONS, "t", "choose('trim')", "Trim queue", show=True),
    bound(TREE, "escape,q", "close", "Close", show=True),
    bound(TREE, "o", "sort", "Sort", show=True),
    bound(TREE, "d,delete", "delete_node", "Delete retained", show=True),
)

KEY_NAMES = {"question_mark": "?", "slash": "/", "escape": "Esc", "enter": "Enter", "tab": "Tab"}


def actions() -> Iterator[Action]:
    """The entries that are App actions (bound to keys, in the palette), in table order."""
    return (a for a in TABLE if a.name is not None and a.target is None)


def key_names(a: Action) -> list[str]:
    """An entry's keys as people write them (``?`` for question_mark)."""
    return [KEY_NAMES.get(k, k) for k in a.keys.split(",")]


def key_display(key: str) -> str:
    """A Textual key name as the footer shows it (``^s`` for ctrl+s)."""
    return KEY_NAMES.get(key, key.replace("ctrl+", "^"))


def bindings(target: str | None = None) -> list[Binding]:
    """The BINDINGS of ``target`` (None: the App), in table order; the footer is drawn from the table by the
    key bar, not from these."""
    entries = actions() if target is None else (a for a in TABLE if a.target == target)
    return [Binding(a.keys, str(a.name), a.label, show=a.show) for a in entries]


def footer(pane: str) -> list[Action]:
    """The footer's entries for the focused pane, most important first."""
    shown = [a for a in TABLE if a.footer and (not a.panes or pane in a.panes)]
    return sorted(shown, key=lambda a: a.footer)


def palette_help(a: Action, read_only: bool = False) -> str:
    """The palette's help line (markup): the keys, then what the action does."""
    keys = ", ".join(f"[b]{escape(k)}[/b]" for k in key_names(a))
    text = escape(a.description) + (" (not on a read-only file)" if read_only and a.writes else "")
    return f"{keys}  {text}"


def palette_title(a: Action) -> str:
    """The palette's title: the action's name and its key, so the palette teaches the keys."""
    return f"{a.title}  ({' '.join(key_names(a))})"


def _cell(keys: str, width: int) -> str:
    """Keys padded to ``width``, or for the second column to the next 3-cell stop (two spaces at least)."""
    return keys.ljust(width if width else -(-(len(keys) + 2) // 3) * 3)


def help_text() -> str:
    """The help screen's key list (markup), section by section in table order."""
    out: list[str] = []
    for group, heading in GROUPS.items():
        out.append(f"[b]{group}[/b]{heading}")
        rows: list[list[list[str]]] = []  # a line: one or two [keys, text] cells
        for a in TABLE:
            if a.group != group:
                continue
            keys = "  ".join(key_names(a))
            if a.help is None:
                rows[-1][-1][0] += "  " + keys
            elif a.beside:
                rows[-1].append([keys, a.help])
            else:
                rows.append([[keys, a.help]])
        for row in rows:
            (k1, t1), *second = row
            line = "  " + _cell(k1, 14) + (t1.ljust(16) + _cell(second[0][0], 0) + second[0][1] if second else t1)
            out.append(escape(line).replace("\n", "\n" + " " * 16))
    return "\n".join(out)


__all__ = ["MODALS", "PANES", "Action", "TABLE", "bound", "actions", "bindings", "footer", "help_text", "key_display", "key_names",
           "palette_help", "palette_title"]
