"""The inspector's keys, once: one table drives the App's bindings, the footer, the help screen and
the command palette (the Harlequin and Posting way), so they cannot drift apart.

Each :class:`Action` is one ``action_<name>`` of :class:`~inspector.tui.app.InspectorApp`; an entry
without a name is a key a widget or Textual handles (arrows, Tab, hex digits, ctrl+p), listed in
the help only. Help lines are laid out from the table: an entry whose ``help`` is None adds its
keys to the line above (``/  n``), one marked ``beside`` takes the second column of it.
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
    """The App's ``action_<name>``; None: a key handled elsewhere, listed in the help only."""
    keys: str
    """Textual key names, comma-separated (``u,ctrl+z``); for a help-only entry, the text shown."""
    group: str
    """The help screen section (a key of :data:`GROUPS`)."""
    help: str | None
    """The help screen text (lines after the first are indented under it); None: on the line above."""
    label: str = ""
    """Short name in the footer and Textual's keys panel."""
    title: str = ""
    """Command palette title."""
    description: str = ""
    """Command palette help line."""
    footer: int = 0
    """Place in the footer, 1 = leftmost; 0: bound but not shown there."""
    beside: bool = False
    """Help: in the second column of the line above."""
    writes: bool = False
    """Edits the document, so refused on a read-only file (the palette says so)."""


NAV, EDIT, OTHER = "Navigation", "Editing", "Other"
GROUPS = {NAV: "", EDIT: " (an overlay: nothing is written until you save)", OTHER: ""}
"""Help sections in order, with what follows the bold heading."""

TABLE: tuple[Action, ...] = (
    Action(None, "↑↓ PgUp PgDn", NAV, "move in the focused pane (mouse: click, wheel)"),
    Action(None, "Tab", NAV, "chunk list → fields → hex"),
    Action("goto", "g", NAV, "go to: 123 chunk, 0x1f / @31 offset, #12 store id", "Goto", "Go to",
           "Jump to a chunk index, file offset (0x.., @..) or store id (#..)", footer=3),
    Action("search", "slash", NAV, "search topic, client id, payload; next match", "Search", "Search",
           "Find text in topics, client ids and payloads", footer=4),
    Action("search_next", "n", NAV, None, "Next", "Search next", "Repeat the last search"),
    Action("filter", "f", NAV, "filter: type:msg topic:a/# client:x store:1-9", "Filter", "Filter",
           "Filter by type, topic filter, client id, store id", footer=5),
    Action("clear_filter", "escape", NAV, None, "Clear", "Clear filter",
           "Stop a running filter, search, check or export; show every chunk again"),
    Action("follow", "r", NAV, "follow: client_msg/retain → msg_store → referrers", "Ref", "Follow reference",
           "client_msg/retain → msg_store; msg_store → everything referencing it", footer=6),
    Action("check", "c", NAV, "check the file; Enter on a finding jumps to it", "Check", "Check file",
           "Run the integrity rules and list findings", footer=7),
    Action("export", "x", NAV, "export the filtered chunks (.jsonl or Parquet dir)", "Export", "Export selection",
           "Write the filtered chunks as JSON lines (.jsonl) or a Parquet dataset (directory)"),
    Action("edit_field", "e", EDIT, "edit the selected field (text, 0x.., hex:..)", "Edit", "Edit field",
           "Edit the selected field's value", footer=8, writes=True),
    Action(None, "Enter", EDIT, None),  # the field tree's select edits too
    Action(None, "0-9 a-f", EDIT, "in the hex view: overwrite bytes (must decode);\n"
                                  "there a-f are digits: Tab out for c, d, e, f"),
    Action("delete", "d", EDIT, "delete chunk / restore (a client: with its subs\nand queued messages)", "Del",
           "Delete chunk", "Delete (or restore) the chunk; a client with its subs and queue", footer=9, writes=True),
    Action("add_copy", "a", EDIT, "add a copy / a blank chunk after it, then edit", "Add copy", "Add a copy",
           "Insert a copy of the chunk after it, to edit into a new one", writes=True),
    Action("add_new", "A", EDIT, None, "Add new", "Add a new chunk",
           "Insert a blank msg_store, client_msg, retain, sub or client after the chunk", writes=True),
    Action("undo", "u,ctrl+z", EDIT, "undo", "Undo", "Undo", "Undo the last edit", footer=10),
    Action("redo", "U,ctrl+y", EDIT, "redo", "Redo", "Redo", "Redo the last undone edit", beside=True),
    Action("save", "ctrl+s", EDIT, "save atomically", "Save", "Save", "Save atomically over the file", footer=11,
           writes=True),
    Action("save_as", "S", EDIT, "save as", "Save as", "Save as", "Save to another file", beside=True),
    Action(None, "ctrl+p", OTHER, "command palette with every action"),
    Action("help", "question_mark", OTHER, "this help", "Help", "Help", "List keys", footer=2),
    Action("quit_app", "q", OTHER, "quit (asks if edits are unsaved)", "Quit", "Quit",
           "Quit (asks when edits are unsaved)", footer=1, beside=True),
)

KEY_NAMES = {"question_mark": "?", "slash": "/", "escape": "Esc"}


def actions() -> Iterator[Action]:
    """The entries that are App actions (bound to keys, in the palette), in table order."""
    return (a for a in TABLE if a.name is not None)


def key_names(a: Action) -> list[str]:
    """An entry's keys as people write them (``?`` for question_mark)."""
    return [KEY_NAMES.get(k, k) for k in a.keys.split(",")]


def bindings() -> list[Binding]:
    """The App's BINDINGS: the footer's in footer order, then the others."""
    bound = sorted(actions(), key=lambda a: (a.footer == 0, a.footer))
    return [Binding(a.keys, str(a.name), a.label, show=a.footer > 0) for a in bound]


def palette_help(a: Action, read_only: bool = False) -> str:
    """The palette's help line (markup): the keys, then what the action does."""
    keys = ", ".join(f"[b]{escape(k)}[/b]" for k in key_names(a))
    text = escape(a.description) + (" (not on a read-only file)" if read_only and a.writes else "")
    return f"{keys}  {text}"


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
            out.append(line.replace("\n", "\n" + " " * 16))
    return "\n".join(out)


__all__ = ["Action", "TABLE", "actions", "bindings", "help_text", "key_names", "palette_help"]
