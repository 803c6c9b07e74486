#!/usr/bin/env python3
"""The house's shape, for a closing note or a review: the longest functions
under src/, how many run over 60/80/100 lines, and the error and event types.
Reads a git revision (default: the working tree), so before/after is two runs:

    python3 tools/metrics.py            # the working tree
    python3 tools/metrics.py 11eb7aa    # any revision
    python3 tools/metrics.py --top 15 HEAD

A function's length is its lines from `fn` to its closing brace (tests
excluded: everything from `#[cfg(test)]` on in a file)."""

import re
import subprocess
import sys
from pathlib import Path

FN = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+|async\s+|unsafe\s+)*fn\s+(\w+)")
TYPE = re.compile(r"^\s*pub(?:\([^)]*\))?\s+(enum|struct|trait)\s+(\w+)")


def sources(rev):
    if rev is None:
        for p in sorted(Path("src").rglob("*.rs")):
            yield str(p), p.read_text()
        return
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "src"],
                           capture_output=True, text=True, check=True).stdout.split()
    for n in sorted(names):
        if n.endswith(".rs"):
            yield n, subprocess.run(["git", "show", f"{rev}:{n}"], capture_output=True,
                                    text=True, check=True).stdout


def strip(line):
    """The line without strings, chars and comments (for brace counting)."""
    line = re.sub(r'"(?:[^"\\]|\\.)*"', '""', line)
    line = re.sub(r"'(?:[^'\\]|\\.)'", "''", line)
    return line.split("//", 1)[0]


def functions(path, text):
    lines = text.split("\n")
    cut = next((i for i, l in enumerate(lines) if l.strip() == "#[cfg(test)]"), len(lines))
    out = []
    i = 0
    while i < cut:
        m = FN.match(lines[i])
        if not m:
            i += 1
            continue
        depth, started, j = 0, False, i
        while j < cut:
            s = strip(lines[j])
            if not started and ";" in s and "{" not in s:
                break  # a declaration (trait method without body)
            depth += s.count("{") - s.count("}")
            started = started or "{" in s
            if started and depth <= 0:
                out.append((j - i + 1, f"{path}::{m.group(1)}"))
                break
            j += 1
        i += 1
    return out


def main():
    args = sys.argv[1:]
    top = 10
    if args[:1] == ["--top"]:
        top, args = int(args[1]), args[2:]
    rev = args[0] if args else None
    fns, errors, events, reporters = [], [], [], []
    for path, text in sources(rev):
        fns += functions(path, text)
        for kind, name in [m.groups() for line in text.split("\n") if (m := TYPE.match(line))]:
            if name.endswith("Error"):
                errors.append(f"{name} ({path})")
            if name.endswith("Event") or name == "Event":
                events.append(f"{name} ({path})")
            if kind == "trait" and ("Report" in name or "Observer" in name or "Listener" in name):
                reporters.append(f"{name} ({path})")
    fns.sort(reverse=True)
    print(f"== {rev or 'working tree'}: {len(fns)} functions under src/")
    for limit in (100, 80, 60):
        print(f"  over {limit} lines: {sum(1 for n, _ in fns if n > limit)}")
    print(f"  longest {top}:")
    for n, name in fns[:top]:
        print(f"    {n:4} {name}")
    print(f"  error types ({len(errors)}): {', '.join(errors)}")
    print(f"  event types ({len(events)}): {', '.join(events)}")
    print(f"  reporter traits ({len(reporters)}): {', '.join(reporters)}")


if __name__ == "__main__":
    main()
