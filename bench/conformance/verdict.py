"""The verdict of a conformance run: each A2A TCK category's counts, and whether it passed.

    python bench/conformance/verdict.py KNOWN_DEFECTS tck-mandatory.txt tck-capabilities.txt ...

Each file is the output of one ``run_tck.py --category NAME`` (named ``tck-NAME.txt``). A run
passes when every failed test is listed in ``KNOWN_DEFECTS`` (a defect of the TCK itself, with
its reason) and every category reached a result; it exits 1 otherwise, naming what failed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

_SUMMARY = re.compile(r"^(?:=+ )?(\d+ (?:passed|failed|skipped|errors?).*) in [\d.]+s", re.MULTILINE)
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)")
_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


def known_defects(path: Path) -> dict[str, str]:
    """Test name -> why it is the TCK's defect (``name  # reason`` lines; ``#`` lines are comments)."""
    known = {}
    for line in path.read_text().splitlines():
        name, _, reason = line.partition("#")
        if name.strip():
            known[name.strip()] = reason.strip()
    return known


def verdict(known: dict[str, str], outputs: list[Path]) -> tuple[list[str], bool]:
    """The lines to print, and whether the run passed."""
    lines, passed = [], True
    for output in outputs:
        category = output.stem.removeprefix("tck-")
        text = output.read_text(errors="replace")
        summaries = _SUMMARY.findall(text)
        if not summaries:
            tail = " / ".join(text.strip().splitlines()[-3:])
            lines.append(f"{category:<13} no result: {tail}")
            passed = False
            continue
        counts = {
            kind.rstrip("s") if kind.startswith("error") else kind: int(n) for n, kind in _COUNT.findall(summaries[-1])
        }
        lines.append(f"{category:<13} " + ", ".join(f"{n} {kind}" for kind, n in counts.items()))
        for node in dict.fromkeys(_FAILED.findall(text)):
            name = node.split("::")[-1].split("[")[0]
            if name in known:
                lines.append(f"    known TCK defect: {node} ({known[name]})")
            else:
                lines.append(f"    FAILED {node}")
                passed = False
    lines.append("A2A TCK: " + ("passed" if passed else "FAILED (fix these, or list a TCK defect with its reason)"))
    return lines, passed


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: verdict.py KNOWN_DEFECTS tck-CATEGORY.txt...", file=sys.stderr)
        return 2
    lines, passed = verdict(known_defects(Path(argv[0])), [Path(arg) for arg in argv[1:]])
    print("\n".join(lines))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
