"""The pages a run's writes put in SQLite's WAL, by table and index: an exact count, not a timing.

    python bench/stores/wal_frames.py            # 300 runs to their pause, then 300 resumes
    python bench/stores/wal_frames.py --n 1000 --shuffle
    python bench/stores/wal_frames.py --write-cost   # what writing one frame costs on this filesystem

A WAL commit writes every page its transaction changed, each as one frame (a 24-byte header and
the page, two ``pwrite`` calls), and on this host those writes are most of what a commit costs.
The count does not drift with the host, so a change to the schema or to a write shows here
exactly, where its timing is lost in the host's noise.

The ``approve`` agent of ``bench/http/project`` is driven through the ASGI app in process, as
``bench/http/asgi_resume.py`` drives it, on a SQLite store in a temp dir. A second connection
holds a read transaction open from before the measured requests, so no checkpoint can restart
the WAL under them: every frame they wrote is still in the file. The WAL is then read frame by
frame (a frame whose header carries the database size ends a transaction), and each page number
is named by SQLite's ``dbstat`` table as the file ends (a page freed and then reused by
another table counts for the latter, so the split by table is close; the totals are exact).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import random
import sqlite3
import statistics
import struct
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "http"))

from asgi_resume import call  # noqa: E402

_HEADER = 32  # the WAL file's header; each frame is a 24-byte header and one page


def transactions(wal: Path, page_size: int, start: int) -> list[list[int]]:
    """The page numbers of each transaction committed in ``wal`` from byte ``start`` on."""
    data = wal.read_bytes()
    frame = 24 + page_size
    found: list[list[int]] = []
    pages: list[int] = []
    for offset in range(start, len(data) - frame + 1, frame):
        page, size_after = struct.unpack(">II", data[offset : offset + 8])
        pages.append(page)
        if size_after:  # a commit frame
            found.append(pages)
            pages = []
    return found


def wal_end(wal: Path) -> int:
    return wal.stat().st_size if wal.exists() else _HEADER


async def measure(n: int, shuffle: bool) -> None:
    from agent_unit import create_agent_unit
    from agent_unit.stores.sqlite import SQLiteStore

    spec = importlib.util.spec_from_file_location("approve", HERE.parent / "http" / "project" / "agents" / "approve.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "runs.db"
        wal = Path(f"{path}-wal")
        store = SQLiteStore(path)
        app = create_agent_unit({"approve": module.agent}, store=store, background_sweep=False)
        for _ in range(200):  # a store with some runs in it, so pages split as they do in use
            await call(app, "POST", "/agents/approve/runs", {"input": {}})

        reader = sqlite3.connect(path, isolation_level=None)
        page_size = reader.execute("PRAGMA page_size").fetchone()[0]
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM runs").fetchone()  # holds the WAL from here on
        began = wal_end(wal)

        ids: list[str] = []
        for _ in range(n):
            ids.append((await call(app, "POST", "/agents/approve/runs", {"input": {}}))["id"])
        between = wal_end(wal)
        if shuffle:
            random.Random(0).shuffle(ids)
        for run_id in ids:
            await call(app, "POST", f"/runs/{run_id}/resume", {"answer": True})
        reader.execute("COMMIT")

        starts = transactions(wal, page_size, began)
        starts = starts[: len(starts) - len(transactions(wal, page_size, between))]
        resumes = transactions(wal, page_size, between)
        await app.engine.aclose()

        names = dict(sqlite3.connect(path).execute("SELECT pageno, name FROM dbstat").fetchall())
        report("runs started to their pause", starts, n, names)
        report(f"resumes ({'in a random order' if shuffle else 'in the order the runs started'})", resumes, n, names)


def write_cost(rounds: int = 5, frames: int = 20_000) -> None:
    """Process time of a WAL frame's two ``pwrite`` calls (header, page), appended to a file in a temp
    dir as a commit appends them, for several page sizes; median of ``rounds``."""
    print(f"process time per frame written (two pwrite calls), median of {rounds} rounds of {frames:,} frames:")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "frames"
        for page_size in (1024, 2048, 4096, 8192, 16384):
            header, page = b"h" * 24, b"p" * page_size
            each = []
            for _ in range(rounds):
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
                began, offset = time.process_time(), 0
                for _ in range(frames):
                    os.pwrite(fd, header, offset)
                    os.pwrite(fd, page, offset + 24)
                    offset += 24 + page_size
                each.append((time.process_time() - began) / frames * 1e6)
                os.close(fd)
            print(f"  {page_size:6,}-byte pages: {statistics.median(each):5.2f} µs")


def report(title: str, found: list[list[int]], n: int, names: dict[int, Any]) -> None:
    by_name = Counter(str(names.get(page, "?")) for pages in found for page in pages)
    total = sum(by_name.values())
    print(f"{title}: {len(found) / n:.2f} transactions and {total / n:.2f} WAL frames each")
    for name, count in by_name.most_common():
        label = "the file's header page" if name == "sqlite_schema" else name
        print(f"  {count / n:5.2f}  {label}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=300, help="runs to start and resume (default 300)")
    parser.add_argument("--shuffle", action="store_true", help="resume the runs in a random order")
    parser.add_argument("--write-cost", action="store_true", help="time writing a frame, for several page sizes")
    args = parser.parse_args()
    if args.write_cost:
        write_cost()
    else:
        asyncio.run(measure(args.n, args.shuffle))
