"""check_docs.py -- the facts the docs must keep, checked against the tree.

The docs are README.md, CONTRIBUTING.md, python/README.md and docs/*.md.
They must:
- resolve every relative link, and every #anchor to a heading (GitHub's
  slugs) of the file it names;
- name every op of the catalog (COLLGEN_OP_MAP in src/collgen.h) in
  README.md, docs/api.md, docs/python.md and docs/multinode.md, and every
  torch op of collgen/torch/op_table.py in docs/python.md;
- list in docs/environment.md every environment variable that the library,
  the CLI or the Python package reads;
- cite every file kept in docs/bench/ (the folder holds cited data only);
- read as a reference: no line mentions a session or a lease.
Commit subjects after SUBJECT_RULE_BASE are at most SUBJECT_MAX characters
(long_subjects; the tests check it where the history is there).

The checks read a `Tree` (the texts, by path relative to the root), so the
tests plant faults in memory. Run `python3 tests/docs/check_docs.py [ROOT]`:
one line per problem, exit 1 when there is any.
"""

import functools
import importlib.util
import os
import re
import sys

CODE_DIRS = ("src", "gen", "cache", "runtime", "python/collgen")
CODE_EXT = (".c", ".h", ".lua", ".py")
OP_DOCS = ("README.md", "docs/api.md", "docs/python.md", "docs/multinode.md")
DIARY = re.compile(r"\b(sessions?|leases?)\b", re.IGNORECASE)
# A call that reads one environment variable named by a literal.
ENV_READ = re.compile(r"(?:\bgetenv|\benv_int|\benviron\.get|\benviron\[|\bos\.getenv)"
                      r"\s*\(?\s*[\"']([A-Za-z_][A-Za-z0-9_]*)[\"']")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`[^`]*`")


class Tree:
    """The texts the checks read: ``docs`` (path -> text of each doc),
    ``code`` (path -> text of each code file of CODE_DIRS), ``header`` (the
    text of src/collgen.h), ``torch_ops`` (the torch op names of
    op_table.OPS), ``bench`` (the paths under docs/bench) and ``files``
    (every file path of the tree, for links)."""

    def __init__(self, root):
        self.root = root
        self.files = set()
        for top, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("build")]
            for n in names:
                self.files.add(os.path.relpath(os.path.join(top, n), root))
            for d in dirs:
                self.files.add(os.path.relpath(os.path.join(top, d), root))
        names = ["README.md", "CONTRIBUTING.md", "python/README.md"] + sorted(
            p for p in self.files if re.fullmatch(r"docs/[^/]+\.md", p))
        self.docs = {p: _read(root, p) for p in names if p in self.files}
        self.code = {p: _read(root, p) for p in sorted(self.files)
                     if p.startswith(tuple(d + "/" for d in CODE_DIRS)) and p.endswith(CODE_EXT)}
        self.header = _read(root, "src/collgen.h")
        self.torch_ops = _torch_ops(root)
        self.bench = sorted(p for p in self.files
                            if p.startswith("docs/bench/") and p not in ("docs/bench",))


def _read(root, path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


def _torch_ops(root):
    """The names of op_table.OPS (the module needs neither torch nor the library)."""
    path = os.path.join(root, "python/collgen/torch/op_table.py")
    spec = importlib.util.spec_from_file_location("collgen_docs_op_table", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return [op.name for op in mod.OPS]


def prose_lines(text):
    """(line number, line) of text outside fenced code blocks, inline code removed."""
    out, fenced = [], False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((n, INLINE_CODE.sub("", line)))
    return out


def slug(heading):
    """GitHub's anchor of a heading: lower case, inline code and link
    syntax dropped, characters other than word characters, spaces and
    hyphens removed, spaces turned into hyphens."""
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    h = h.replace("`", "")
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


@functools.lru_cache(maxsize=None)
def anchors(text):
    """Every heading anchor of a markdown text, with GitHub's -1, -2 for repeats."""
    seen, out, fenced = {}, set(), False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


def check_links(tree):
    """Problems with the relative links and anchors of the docs."""
    problems = []
    for path, text in tree.docs.items():
        base = os.path.dirname(path)
        for n, line in prose_lines(text):
            for target in LINK.findall(line):
                if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, mailto:
                    continue
                file_part, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(base, file_part)) if file_part else path
                if dest not in tree.files:
                    problems.append(f"{path}:{n}: link to a missing file: {target}")
                    continue
                if anchor and dest.endswith(".md"):
                    text_of = tree.docs.get(dest)
                    if text_of is None:
                        text_of = _read(tree.root, dest)
                    if anchor not in anchors(text_of):
                        problems.append(f"{path}:{n}: link to a missing anchor: {target}")
    return problems


def catalog_ops(header):
    """The op ids of COLLGEN_OP_MAP, in the catalog's order."""
    body = header[header.index("#define COLLGEN_OP_MAP(XX)"):]
    body = body[:body.index("\n\n")]
    ops = re.findall(r"XX\(\s*[A-Z0-9_]+\s*,\s*\d+\s*,\s*([a-z0-9_]+)\s*,", body)
    if not ops:
        raise ValueError("src/collgen.h: no op in COLLGEN_OP_MAP")
    return ops


def check_ops(tree):
    """Docs that leave out an op of the catalog or a torch op."""
    problems = []
    for doc in OP_DOCS:
        text = tree.docs.get(doc, "")
        for op in catalog_ops(tree.header):
            if not re.search(rf"\b{op}\b", text):
                problems.append(f"{doc}: does not name the op {op}")
    for name in tree.torch_ops:
        if not re.search(rf"\b{name}\b", tree.docs.get("docs/python.md", "")):
            problems.append(f"docs/python.md: does not name the torch op {name}")
    return problems


def env_vars(code):
    """{variable: first path that reads it} over the code texts."""
    found = {}
    for path, text in code.items():
        for var in ENV_READ.findall(text):
            found.setdefault(var, path)
    return found


def check_env(tree):
    """Variables the code reads that docs/environment.md does not list."""
    listed = tree.docs.get("docs/environment.md", "")
    return [f"docs/environment.md: does not list {var} (read in {path})"
            for var, path in sorted(env_vars(tree.code).items())
            if f"`{var}`" not in listed]


def check_diary(tree):
    """Lines that mention a session or a lease."""
    return [f"{path}:{n}: mentions a session or lease: {line.strip()}"
            for path, text in tree.docs.items()
            for n, line in enumerate(text.splitlines(), 1) if DIARY.search(line)]


def check_bench(tree):
    """Files of docs/bench that no doc cites (by name)."""
    cited = {w for text in tree.docs.values() for w in re.findall(r"[\w.-]+", text)}
    return [f"{p}: cited by no doc (docs/bench keeps cited data only)"
            for p in tree.bench if os.path.basename(p) not in cited]


# Commit subjects are at most SUBJECT_MAX characters from the commit after
# this one on (CONTRIBUTING.md); older history keeps its long subjects.
SUBJECT_RULE_BASE = "644416f"
SUBJECT_MAX = 72


def long_subjects(root, base=SUBJECT_RULE_BASE):
    """Subjects of the commits after `base` longer than SUBJECT_MAX, or
    None when the history is not there to read (no git, a shallow clone)."""
    import subprocess
    try:
        out = subprocess.run(["git", "-C", root, "log", "--format=%h %s", f"{base}..HEAD"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return [line for line in out.stdout.splitlines()
            if len(line.split(" ", 1)[-1]) > SUBJECT_MAX]


CHECKS = (check_links, check_ops, check_env, check_diary, check_bench)


def problems(tree):
    """Every problem of every check."""
    return [p for check in CHECKS for p in check(tree)]


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    found = problems(Tree(os.path.abspath(root)))
    for p in found:
        print(p)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
