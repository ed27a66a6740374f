#!/usr/bin/env python3
"""abi_snapshot.py -- the public ABI of src/collgen.h as text, one line per
item: every COLLGEN_API declaration (comments dropped, whitespace collapsed),
every callback typedef, and every public struct's fields with their types
(python/tools/gen_abi.py's Header model).

  python3 tests/abi/abi_snapshot.py > tests/abi/baseline.txt   # take a snapshot

tests/abi/baseline.txt is the API of collgen 0.1 (commit 644416f). The
test python/tests/test_abi_stable.py fails when a line of it is missing
from the snapshot of today's header: a symbol removed or a signature or
struct changed. New lines (new functions, new structs) are allowed.
Standard library only.
"""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python", "tools"))
import gen_abi  # noqa: E402


def snapshot(text):
    """The sorted lines of the ABI that header text declares."""
    bare = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    lines = set()
    for m in re.finditer(r"\bCOLLGEN_API\b[^;{]*;", bare):
        lines.add("function " + " ".join(m.group(0).split()))
    for m in re.finditer(r"\btypedef\b[^;{]*\(\s*\*\s*\w+\s*\)[^;]*;", bare):
        lines.add("callback " + " ".join(m.group(0).split()))
    h = gen_abi.Header(text)
    for name, fields in h.structs.items():
        lines.add(f"struct {name} {fields!r}")
    return sorted(lines)


def main():
    with open(os.path.join(REPO, "src", "collgen.h")) as f:
        print("\n".join(snapshot(f.read())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
