"""The public ABI of collgen 0.1 is still there: every declaration, callback
typedef and public struct of tests/abi/baseline.txt (taken from the header
of commit 644416f by tests/abi/abi_snapshot.py) is in today's collgen.h
with the same text and fields. New functions and structs may be added."""

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/abi/..
sys.path.insert(0, os.path.join(REPO, "tests", "abi"))
import abi_snapshot  # noqa: E402

BASELINE = os.path.join(REPO, "tests", "abi", "baseline.txt")


def _today():
    with open(os.path.join(REPO, "src", "collgen.h")) as f:
        return set(abi_snapshot.snapshot(f.read()))


def test_every_baseline_item_is_unchanged():
    with open(BASELINE) as f:
        baseline = [line for line in f.read().splitlines() if line]
    assert len([b for b in baseline if b.startswith("function ")]) >= 54
    missing = [b for b in baseline if b not in _today()]
    assert missing == [], "changed or removed since the baseline:\n" + "\n".join(missing)


def test_a_changed_signature_is_caught():
    with open(os.path.join(REPO, "src", "collgen.h")) as f:
        text = f.read()
    changed = text.replace("int root, int group_size", "int root, int group_sz, int extra", 1)
    assert changed != text
    with open(BASELINE) as f:
        baseline = set(f.read().splitlines())
    assert baseline - set(abi_snapshot.snapshot(changed))
