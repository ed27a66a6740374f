"""The docs check passes on the tree, and fails on each fault planted in
a copy of the tree's texts (a broken link or anchor, a missing op, an
unlisted variable, a diary line, an uncited data file)."""

import copy
import os
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import check_docs  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture(scope="module")
def tree():
    return check_docs.Tree(ROOT)


def planted(tree, doc=None, text=None, code=None, bench=None):
    """A copy of tree with doc's text replaced (or code added)."""
    t = copy.copy(tree)
    t.docs, t.code, t.bench = dict(tree.docs), dict(tree.code), list(tree.bench)
    if doc is not None:
        t.docs[doc] = text
    if code is not None:
        t.code.update(code)
    if bench is not None:
        t.bench.append(bench)
        t.files = tree.files | {bench}
    return t


def test_tree_passes(tree):
    assert check_docs.problems(tree) == []


def test_catalog_ops_match_the_python_table(tree):
    """Two readings of the catalog: the header's X-macro and op_table's rows."""
    from_header = check_docs.catalog_ops(tree.header)
    spec_path = os.path.join(ROOT, "python/collgen/torch/op_table.py")
    text = open(spec_path, encoding="utf-8").read()
    from_table = set(re.findall(r'Op\("[a-z_0-9]+",\s*"([a-z_0-9]+)"', text))
    assert set(from_header) == from_table
    assert len(from_header) == len(set(from_header))


def test_env_scan_finds_every_getenv_line(tree):
    """Every literal on a line that calls getenv is found by the scan."""
    expected = set()
    for text in tree.code.values():
        for line in text.splitlines():
            if "getenv(" in line and not line.lstrip().startswith(("/*", "**", "#", "--")):
                expected.update(re.findall(r'getenv\("([A-Z_0-9]+)"\)', line))
    assert expected and expected <= set(check_docs.env_vars(tree.code))


def test_slugs():
    assert check_docs.slug("Adding an op") == "adding-an-op"
    assert check_docs.slug("`collgen_run` and FP8 (sm_89+)") == "collgen_run-and-fp8-sm_89"
    assert check_docs.slug("[Link](x.md) here") == "link-here"
    assert check_docs.anchors("# A\n## A\n```\n# not\n```\n") == {"a", "a-1"}


def test_broken_link_fails(tree):
    t = planted(tree, "README.md", tree.docs["README.md"] + "\nSee [x](docs/no-such-page.md).\n")
    assert any("missing file: docs/no-such-page.md" in p for p in check_docs.problems(t))


def test_broken_anchor_fails(tree):
    t = planted(tree, "README.md", tree.docs["README.md"] + "\n[x](docs/api.md#no-such-heading)\n")
    assert any("missing anchor: docs/api.md#no-such-heading" in p for p in check_docs.problems(t))


def test_link_in_code_is_not_a_link(tree):
    t = planted(tree, "README.md", tree.docs["README.md"] + "\n`[x](nowhere.md)`\n")
    assert check_docs.problems(t) == check_docs.problems(tree)


def test_missing_op_fails(tree):
    op = check_docs.catalog_ops(tree.header)[-1]
    for doc in check_docs.OP_DOCS:
        text = re.sub(rf"\b{op}\b", "an_op", tree.docs[doc])
        found = check_docs.problems(planted(tree, doc, text))
        assert f"{doc}: does not name the op {op}" in found


def test_missing_torch_op_fails(tree):
    name = tree.torch_ops[0]
    text = re.sub(rf"\b{name}\b", "a_method", tree.docs["docs/python.md"])
    found = check_docs.problems(planted(tree, "docs/python.md", text))
    assert f"docs/python.md: does not name the torch op {name}" in found


def test_unlisted_variable_fails(tree):
    t = planted(tree, code={"runtime/planted.c": 'const char *v = getenv("COLLGEN_PLANTED");\n'})
    assert ("docs/environment.md: does not list COLLGEN_PLANTED (read in runtime/planted.c)"
            in check_docs.problems(t))
    t = planted(tree, code={"python/collgen/planted.py": 'os.environ.get("COLLGEN_PLANTED_PY")\n'})
    assert any("COLLGEN_PLANTED_PY" in p for p in check_docs.problems(t))


def test_diary_line_fails(tree):
    for line in ("Measured in session 12 on one H200.", "The numbers of this lease."):
        t = planted(tree, "docs/cache.md", tree.docs["docs/cache.md"] + "\n" + line + "\n")
        assert any("mentions a session or lease" in p for p in check_docs.problems(t))


def test_uncited_bench_file_fails(tree):
    t = planted(tree, bench="docs/bench/planted-uncited.csv")
    assert ("docs/bench/planted-uncited.csv: cited by no doc (docs/bench keeps cited data only)"
            in check_docs.problems(t))


def test_commit_subjects_are_short():
    found = check_docs.long_subjects(ROOT)
    if found is None:
        pytest.skip("no git history here")
    assert found == []


def test_long_subject_is_found():
    """Against a base before the rule, the old long subjects are found."""
    found = check_docs.long_subjects(ROOT, check_docs.SUBJECT_RULE_BASE + "~3")
    if found is None:
        pytest.skip("no git history here")
    assert len(found) >= 1
