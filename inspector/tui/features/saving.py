"""Writing files: save, save as, quit with unsaved edits, and export of the current selection.

Mixed into :class:`~inspector.tui.app.InspectorApp`. Saving is the document's atomic save, with
the checker run on the written temp file first (:mod:`~inspector.tui.model.savecheck`): new errors are
listed and the file is written only when the user says so. Export writes the file as saved (not
unsaved edits) through ``exporters.files`` in a worker.
"""

from __future__ import annotations

import os
from typing import Any

from textual import work

from codec import CodecError, FileChangedError
from inspector.tui.model.document import Document, EditRefused
from inspector.tui.model.jobs import Cancelled, Progress
from inspector.tui.model.savecheck import NewErrors, SaveCheck
from inspector.tui.screens.confirm import ConfirmQuit, ConfirmSave
from inspector.tui.screens.prompt import PromptScreen


def no_directory(text: str) -> str | None:
    """Why a path prompt refuses ``text``: the directory it would go in does not exist; else None."""
    path = os.path.expanduser(text.strip())
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        return f"{directory}: no such directory"
    return None


class SavingMixin:
    """Save, save as, quit and export actions of the inspector app."""

    doc: Document  # the app's (InspectorApp.__init__ sets it)
    stopped_at: dict[str, int]
    save_check: SaveCheck
    filter_spec: Any

    # ------------------------------------------------------------ save / quit
    def action_save(self) -> None:
        if not self.editable():
            return
        if not self.doc.is_dirty():
            self.say("nothing to save")
            return
        self.do_save(None)

    def action_save_as(self) -> None:
        if self.doc.db.empty:
            return
        if self.doc.refused_save_as:
            self.say(f"not saved: {self.doc.refused_save_as}", "warning")
            return
        self.push_screen(PromptScreen("Save as", self.doc.path, "path of the new file", check=no_directory),
                         self.do_save_as)

    def do_save_as(self, path: str | None) -> None:
        if path:
            self.do_save(os.path.expanduser(path.strip()))

    def do_save(self, path: str | None, then_exit: bool = False, confirmed: bool = False) -> bool:
        """Save (to ``path``, default the file); unless ``confirmed``, ask first when the result would
        have errors the file has not now."""
        try:
            # (a store's edits are checked row by row as they are typed and again when written)
            verify = None if confirmed or not self.doc.checks_save else self.save_check.hook(self.doc.db,
                                                                                      self.doc.full_overlay())
            result = self.doc.save(path, verify=verify)
        except NewErrors as exc:
            target = path or self.doc.path
            self.say(f"not saved yet: {len(exc.errors)} new error(s) — s saves anyway, Esc goes back")
            self.push_screen(ConfirmSave(exc.errors, exc.where, target),
                             lambda save: self.do_save(path, then_exit, confirmed=True) if save else None)
            return False
        except FileChangedError as exc:
            self.say(f"not saved: {exc}", "error")
            return False
        except (CodecError, EditRefused) as exc:
            self.say(f"not saved: {exc}", "error")
            return False
        self.hex.editable = not self.doc.read_only
        self.refresh_after_edit()  # the chunk numbers are the saved file's: the filter runs again on it
        self.say(self.doc.saved_text(result))
        self.file_saved()
        if then_exit:
            self.exit()
        return True

    def action_quit_app(self) -> None:
        if self.doc.is_dirty():
            self.push_screen(ConfirmQuit(len(self.doc.undo_stack)), self.quit_answer)
        else:
            self.exit()

    def quit_answer(self, answer: str | None) -> None:
        if answer == "save":
            self.do_save(None, then_exit=True)
        elif answer == "discard":
            self.exit()

    # ------------------------------------------------------------ export
    def action_export(self) -> None:
        if self.doc.db.empty or not self.need_index():
            return
        base = os.path.splitext(self.doc.path)[0]
        self.push_screen(PromptScreen("Export the current selection (the file as saved, not unsaved edits)",
                                      base + ".jsonl", hint="NAME.jsonl: JSON lines; any other name: a Parquet "
                                      "dataset directory (one file per chunk kind)", check=no_directory),
                         self.do_export)

    def do_export(self, out: str | None) -> None:
        if not out:
            return
        spec = self.filter_spec if self.filter_text else None  # as the filter worker resolved it
        self.say(f"exporting to {out}…")
        self.export_worker(out.strip(), spec)

    @work(thread=True, exclusive=True, group="export")
    def export_worker(self, out: str, spec: Any) -> None:
        try:
            from exporters import files
        except ImportError:
            self.call_from_thread(self.say, "export needs the exporters package (not installed)", "error")
            return
        if spec is not None and spec.prefixes:  # exported before the filter worker resolved its prefixes
            from inspector.tui.features.filters import resolve_prefixes

            try:
                spec = resolve_prefixes(self.doc, spec)
            except ValueError as exc:
                self.call_from_thread(self.say, f"export failed: {exc}", "error")
                return
        selection = spec.selection() if spec is not None else None
        kinds = sorted(spec.kinds) if spec is not None and spec.kinds else list(files.KINDS)
        progress = Progress(self, "export", self.doc.db.size)
        progress.post(False)

        def report(_path: str, done: int, total: int) -> None:  # the exporters' progress(path, bytes, of)
            progress(done, total)

        export = files.export_jsonl if out.endswith(".jsonl") else files.export_parquet
        try:
            counts = export([self.doc.path], out, kinds=kinds, selection=selection, endian=self.doc.endian,
                            progress=report)
        except Cancelled:  # the exporter removed its unfinished file
            self.stopped_at["export"] = progress.done
            return
        except (CodecError, OSError, ValueError) as exc:
            self.call_from_thread(self.say, f"export failed: {exc}", "error")
            return
        finally:
            progress.finish()
        rows = ", ".join(f"{k} {n}" for k, n in counts.items() if n)
        self.call_from_thread(self.say, f"exported to {out}: {rows or 'nothing selected'}")
