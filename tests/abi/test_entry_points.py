"""runtime/op_entry_points.c is what runtime/gen_entry_points.py writes
from today's src/collgen.h, and the generator covers every entry point of
every op of the catalog (two process models, and _fp8 forms where the op
has FP8 output)."""

import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "runtime"))
import gen_entry_points  # noqa: E402


def _header():
    with open(os.path.join(REPO, "src", "collgen.h")) as f:
        return f.read()


def test_the_generated_file_is_current():
    with open(gen_entry_points.OUTPUT) as f:
        assert f.read() == gen_entry_points.render(_header()), \
            "runtime/op_entry_points.c is stale: run python3 runtime/gen_entry_points.py"


def test_check_fails_on_a_stale_file(tmp_path):
    stale = tmp_path / "op_entry_points.c"
    stale.write_text(gen_entry_points.render(_header()).replace("collgen_run(", "collgen_Run(", 1))
    rc = subprocess.run([sys.executable, os.path.join(REPO, "runtime", "gen_entry_points.py"),
                         "--check", "--output", str(stale)], capture_output=True, text=True)
    assert rc.returncode == 1 and "stale" in rc.stderr


def test_every_op_has_its_entry_points():
    text = _header()
    body = text[text.index("#define COLLGEN_OP_MAP(XX)"):]
    body = body[:body.index("\n\n")]
    rows = re.findall(r"XX\(\s*[A-Z0-9_]+\s*,\s*\d+\s*,\s*([a-z0-9_]+)\s*,[^)]*,\s*([01])\s*\)", body)
    assert rows
    want = set()
    for op, fp8 in rows:
        want |= {f"collgen_{op}", f"collgen_rank_{op}"}
        if fp8 == "1":
            want |= {f"collgen_{op}_fp8", f"collgen_rank_{op}_fp8"}
    got = {name for name, *_ in gen_entry_points.entry_points(text)}
    assert got == want
