"""Finding and loading libcollgen.so, and refusing a library that does not
match the package: $COLLGEN_LIBRARY, next to the package, the system
loader; every failure names each place tried; struct sizes and status
codes are checked. Importing the package loads nothing: the library is
loaded at its first use."""

import ctypes
import os
import shutil
import subprocess

import pytest

import collgen
from collgen import _abi, _library
from conftest import PACKAGE_DIR, PYTHON, library_env

# Imports the package, then uses the library (which loads it); prints the
# class and message of the failure, or "imported <path>".
IMPORT = """
import collgen
try:
    path = collgen.library_path()
except ImportError as e:
    print(type(e).__module__ + "." + type(e).__name__)
    print(e)
else:
    print("imported " + path)
"""


def run_import(env, code=IMPORT, cwd=None):
    """Runs ``code`` in a fresh interpreter with ``env``; returns its stdout lines."""
    p = subprocess.run([PYTHON, "-c", code], env=env, cwd=cwd, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def package_copy(tmp_path):
    """A copy of the package (its .py files only) under tmp_path; returns its parent."""
    root = tmp_path / "site"
    shutil.copytree(PACKAGE_DIR, root / "collgen",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so*", "torch"))
    return root


def test_loads_the_library_named_by_the_environment():
    path = os.environ["COLLGEN_LIBRARY"]
    assert collgen.library_path() == path
    assert os.path.samefile(collgen.library_path(), path)
    c = collgen.CONSTANTS
    assert collgen.__version__ == f"{c['VERSION_MAJOR']}.{c['VERSION_MINOR']}.{c['VERSION_PATCH']}"


def test_missing_explicit_library_is_named(tmp_path):
    missing = str(tmp_path / "nowhere" / "libcollgen.so")
    out = run_import(library_env(COLLGEN_LIBRARY=missing))
    assert out[0] == "collgen._library.LibraryNotFound"
    assert issubclass(collgen.LibraryNotFound, ImportError)
    text = "\n".join(out[1:])
    assert f"$COLLGEN_LIBRARY: {missing} (no such file)" in text
    assert "next to the package" not in text, "an explicit path must be the only place tried"


# Every first use of the library, in a fresh interpreter whose library is
# missing: each prints its exception's class and message.
FIRST_USES = """
import collgen, collgen.catalog, collgen.errors
import sys
loaded = [m for m in sys.modules if m.startswith("collgen.") and m not in (
    "collgen._library", "collgen.catalog", "collgen.errors", "collgen._errors_generated")]
print("imported", loaded)
# The exceptions need no library.
e = collgen.TimeoutError("late", -12)
assert isinstance(e, TimeoutError) and e.name == "COLLGEN_ERR_TIMEOUT", e.name
assert collgen.error_class(-1) is collgen.InvalidArgument
for use in (lambda: collgen.catalog.OPS, lambda: collgen.DTYPES, lambda: collgen.Communicator,
            lambda: collgen.UniqueId, lambda: collgen.__version__, collgen.library_path,
            lambda: collgen.catalog.dtype_bytes("bf16"), collgen.errors.last_error):
    try:
        use()
    except ImportError as e:
        print(repr((type(e).__name__, str(e))))
    else:
        print("no error")
"""


def test_import_loads_nothing_and_the_first_use_names_the_missing_library(tmp_path):
    missing = str(tmp_path / "nowhere" / "libcollgen.so")
    out = run_import(library_env(COLLGEN_LIBRARY=missing, LD_LIBRARY_PATH=""), code=FIRST_USES,
                     cwd=str(tmp_path))
    assert out[0] == "imported []", out
    message = ("collgen: libcollgen.so could not be loaded; tried, in order:\n"
               f"  $COLLGEN_LIBRARY: {missing} (no such file)\n"
               "Set COLLGEN_LIBRARY to the library's path, or install it with cmake --install.")
    assert out[1:] == [repr(("LibraryNotFound", message))] * 8


def test_import_maps_no_library_until_its_first_use():
    code = """
import collgen, collgen.catalog
maps = lambda: open("/proc/self/maps").read()
print("libcollgen" in maps())
print(sorted(collgen.catalog.OPS) == sorted(collgen.OPS))
print("libcollgen" in maps())
"""
    if not os.path.exists("/proc/self/maps"):
        pytest.skip("no /proc/self/maps here")
    assert run_import(library_env(), code=code) == ["False", "True", "True"]


def test_library_without_catalog_is_refused(fake_cuda_path):
    out = run_import(library_env(COLLGEN_LIBRARY=fake_cuda_path))
    assert out[0] == "collgen._library.LibraryNotFound"
    assert f"{fake_cuda_path} (loaded, but it has no collgen_catalog_entry" in "\n".join(out[1:])


def test_without_library_every_place_tried_is_named(tmp_path):
    root = package_copy(tmp_path)
    env = library_env(COLLGEN_LIBRARY=None, LD_LIBRARY_PATH="")
    env["PYTHONPATH"] = str(root)
    out = run_import(env, cwd=str(tmp_path))
    if out[0].startswith("imported "):
        pytest.skip(f"a libcollgen is installed for the system loader here ({out[0]})")
    assert out[0] == "collgen._library.LibraryNotFound"
    text = "\n".join(out[1:])
    here = root / "collgen"
    for line in (f"next to the package: {here / 'libcollgen.so.0'} (no such file)",
                 f"next to the package: {here / 'libcollgen.so'} (no such file)",
                 "the system loader: libcollgen.so.0 (", "the system loader: libcollgen.so ("):
        assert line in text, f"{line!r} not in:\n{text}"
    assert "COLLGEN_LIBRARY" in text


def test_library_next_to_the_package_is_found(tmp_path):
    root = package_copy(tmp_path)
    shutil.copyfile(os.environ["COLLGEN_LIBRARY"], root / "collgen" / "libcollgen.so.0")
    env = library_env(COLLGEN_LIBRARY=None, LD_LIBRARY_PATH="")
    env["PYTHONPATH"] = str(root)
    assert run_import(env, cwd=str(tmp_path)) == [
        f"imported {root / 'collgen' / 'libcollgen.so.0'}"]


def test_struct_sizes_match_the_library():
    built = {e.name: e.value for e in _library.catalog["struct"]}
    assert set(_abi.STRUCTS) <= set(built)
    for name, cls in _abi.STRUCTS.items():
        assert built[name] == ctypes.sizeof(cls), name
    assert _abi._check_struct_sizes() is None


def _catalog_with(struct_name, size):
    """A copy of the catalog whose "struct" table says ``struct_name`` is
    ``size`` bytes (None: leaves it out)."""
    cat = dict(_library.catalog)
    rows = [e for e in cat["struct"] if e.name != struct_name]
    if size is not None:
        rows.append(_library.Entry(struct_name, size, 8))
    cat["struct"] = rows
    return cat


def test_struct_size_mismatch_names_both_sizes(monkeypatch):
    real = ctypes.sizeof(_abi.CommOptions)
    monkeypatch.setattr(_abi, "catalog", _catalog_with("collgen_comm_options_t", real + 8))
    with pytest.raises(collgen.LibraryNotFound) as e:
        _abi._check_struct_sizes()
    assert (f"collgen_comm_options_t is {real + 8} bytes in the library but {real} "
            "in this package's declaration") in str(e.value)


def test_struct_missing_from_the_library_is_refused(monkeypatch):
    monkeypatch.setattr(_abi, "catalog", _catalog_with("collgen_comm_health_t", None))
    with pytest.raises(collgen.LibraryNotFound, match="does not describe collgen_comm_health_t"):
        _abi._check_struct_sizes()


def test_import_refuses_a_struct_mismatch():
    # _library loads under a bare package (so that nothing imports _abi
    # yet), its catalog is made to say 8 bytes less (as if the package
    # declared a field more), then _abi's import-time check runs.
    code = f"""
import sys, types
pkg = types.ModuleType("collgen")
pkg.__path__ = [{PACKAGE_DIR!r}]
sys.modules["collgen"] = pkg
import collgen._library as L
real = {{e.name: e.value for e in L.catalog["struct"]}}["collgen_comm_info_t"]
for e in L.catalog["struct"]:
    if e.name == "collgen_comm_info_t":
        e.value = real - 8
try:
    import collgen._abi
except ImportError as e:
    print(type(e).__name__)
    print(e)
    print(real)
"""
    out = run_import(library_env(), code=code)
    assert out[0] == "LibraryNotFound", out
    real = int(out[-1])
    assert (f"collgen_comm_info_t is {real - 8} bytes in the library but {real} in this "
            "package's declaration") in out[1]


def _catalog_with_statuses(statuses):
    cat = dict(_library.catalog)
    cat["status"] = [_library.Entry(name, code, 0) for name, code in statuses]
    return cat


def test_the_status_table_matches_the_generated_exceptions():
    from collgen import _errors_generated
    assert {e.name: e.value for e in _library.catalog["status"]} == _errors_generated.STATUSES
    assert _abi._check_statuses() is None


def test_a_status_table_that_differs_is_refused_naming_each_difference(monkeypatch):
    rows = [(e.name, e.value) for e in _library.catalog["status"]]
    changed = [r for r in rows if r[0] != "PEER"] + [("NEW_ONE", -99)]
    changed = [(n, -13 if n == "TIMEOUT" else c) for n, c in changed]
    monkeypatch.setattr(_abi, "catalog", _catalog_with_statuses(changed))
    with pytest.raises(collgen.LibraryNotFound) as e:
        _abi._check_statuses()
    text = str(e.value)
    assert text.startswith("collgen: the library's status codes differ from this package's "
                           "exceptions (collgen/_errors_generated.py): ")
    for part in ("COLLGEN_ERR_TIMEOUT is -13 in the library but -12 in the package",
                 "the library has COLLGEN_ERR_NEW_ONE (-99), the package does not",
                 "the package has COLLGEN_ERR_PEER (-16), the library does not",
                 "different versions of collgen.h; install them together"):
        assert part in text, text


def test_cmake_install_puts_the_package_beside_its_library(tmp_path):
    """cmake --install of the build ctest runs from: the package lands in
    <prefix>/<COLLGEN_PYTHON_INSTALL_DIR> with libcollgen.so inside it, and
    imports from there with no $COLLGEN_LIBRARY."""
    build, cmake = os.environ.get("COLLGEN_TEST_BUILD_DIR"), os.environ.get("COLLGEN_TEST_CMAKE")
    if not build or not cmake:
        pytest.skip("COLLGEN_TEST_BUILD_DIR / COLLGEN_TEST_CMAKE unset (ctest sets them)")
    prefix = tmp_path / "prefix"
    p = subprocess.run([cmake, "--install", build, "--prefix", str(prefix)], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    site = prefix / "lib" / "python3" / "site-packages"
    assert (site / "collgen" / "torch" / "ops.py").exists()
    env = library_env(COLLGEN_LIBRARY=None, LD_LIBRARY_PATH="")
    env["PYTHONPATH"] = str(site)
    assert run_import(env, cwd=str(tmp_path)) == [
        f"imported {site / 'collgen' / 'libcollgen.so.0'}"]
