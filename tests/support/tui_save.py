"""Drive the inspector's save as a user would, for the attacker test: ``python tui_save.py FILE``.

Opens FILE in the TUI (a Pilot, no terminal), deletes the first retained row, saves with ctrl+s (a backup
kept), undoes past the save and saves again (a second backup), then prints the status line each time.
Exit 0 when it ran (a refused save is a status line, not a failure), 2 with one line when the file is
refused at opening (as ``mosqdb inspect`` refuses it).
"""

from __future__ import annotations

import asyncio
import sys


async def drive(path: str) -> None:
    from codec import CodecError
    from inspector.tui.app import InspectorApp
    from inspector.tui.model.storedoc import open_document

    try:
        doc = open_document(path)
    except CodecError as exc:  # refused as `mosqdb inspect` refuses it: one line, exit 2
        print(exc, file=sys.stderr)
        raise SystemExit(2) from None
    app = InspectorApp(doc, check_at=1.8e9, detail_delay=0)
    async with app.run_test(size=(100, 30)) as pilot:

        async def settle() -> None:
            await pilot.pause()
            await app.workers.wait_for_complete()
            await pilot.pause()

        await settle()
        app.apply_filter("type:retain")
        await settle()
        for key in ("d", "ctrl+s", "u", "ctrl+s"):
            await pilot.press(key)
            await settle()
            if key == "ctrl+s":
                print(str(app.query_one("#status").render()))
    app.doc.close()


if __name__ == "__main__":
    asyncio.run(drive(sys.argv[1]))
