"""Shared fixtures of the collgen package's CPU tests (no GPU).

The package is imported from $COLLGEN_LIBRARY (ctest sets it); the
stand-in CUDA driver comes from $COLLGEN_TEST_FAKE_CUDA, and the tests
that run the runtime on it skip, saying so, when that is unset. Every
kernel compile goes to a fresh temporary cache directory, never ~/.cache.
"""

import os
import sys

import pytest

from fakecuda import SETTINGS, StandIn

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PACKAGE_DIR = os.path.join(REPO, "python", "collgen")
HEADER = os.path.join(REPO, "src", "collgen.h")
PYTHON = sys.executable
POISON = 0xAB
BUFFER_BYTES = 1 << 16

FAKE_CUDA = os.environ.get("COLLGEN_TEST_FAKE_CUDA") or None
if FAKE_CUDA:
    # Before anything loads the driver: collgen reads it once per process.
    os.environ["COLLGEN_CUDA_LIBRARY"] = FAKE_CUDA
for _name in SETTINGS:
    os.environ.pop(_name, None)


@pytest.fixture(scope="session", autouse=True)
def default_cache_dir(tmp_path_factory):
    """$COLLGEN_CACHE_DIR for the session (and the processes it starts): a
    safety net under the cache_dir options, so that nothing reaches the
    user's cache."""
    os.environ["COLLGEN_CACHE_DIR"] = str(tmp_path_factory.mktemp("default-cache"))


@pytest.fixture(scope="session")
def fake_cuda_path():
    """The stand-in driver's path; skips the test when it is not given."""
    if not FAKE_CUDA:
        pytest.skip("COLLGEN_TEST_FAKE_CUDA is unset: it names build/tests/libfakecuda.so "
                    "(ctest sets it)")
    if not os.path.exists(FAKE_CUDA):
        pytest.fail(f"COLLGEN_TEST_FAKE_CUDA={FAKE_CUDA}: no such file")
    return FAKE_CUDA


@pytest.fixture(scope="session")
def driver(fake_cuda_path):
    """The stand-in driver (StandIn): memory, contexts and counters."""
    return StandIn(fake_cuda_path)


@pytest.fixture
def cache_dir(tmp_path):
    """A fresh, empty kernel cache directory for this test."""
    path = tmp_path / "cache"
    path.mkdir()
    return str(path)


class Buffers:
    """Poisoned stand-in buffers: ``buf[rank][i]`` is a device pointer of
    BUFFER_BYTES bytes on device ``rank``, every byte POISON."""

    def __init__(self, driver, ranks, count):
        self.driver = driver
        self.buf = [[driver.alloc(r, BUFFER_BYTES, POISON) for _ in range(count)]
                    for r in range(ranks)]

    def poison(self):
        """Writes POISON over every buffer again."""
        for row in self.buf:
            for p in row:
                self.driver.write(p, bytes([POISON]) * BUFFER_BYTES)

    def written(self):
        """(rank, index) of every buffer that no longer holds only POISON."""
        want = bytes([POISON]) * BUFFER_BYTES
        return [(r, i) for r, row in enumerate(self.buf) for i, p in enumerate(row)
                if self.driver.read(p, BUFFER_BYTES) != want]

    def free(self):
        """Frees every buffer."""
        for row in self.buf:
            for p in row:
                self.driver.free(p)


@pytest.fixture
def poisoned(driver):
    """A factory: poisoned(ranks, count) -> Buffers, freed after the test."""
    made = []

    def make(ranks=2, count=6):
        """``count`` poisoned buffers on each of ``ranks`` devices."""
        b = Buffers(driver, ranks, count)
        made.append(b)
        return b

    yield make
    for b in made:
        b.free()


def library_env(**extra):
    """The environment of a subprocess that imports collgen from this
    checkout: this one's, plus ``extra`` (a value of None removes a name)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(REPO, "python"), HERE])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


@pytest.fixture(scope="module")
def comm2(driver, tmp_path_factory):
    """A Communicator over stand-in devices 0 and 1 (one process, 2 ranks)."""
    import collgen
    c = collgen.Communicator([0, 1], cache_dir=str(tmp_path_factory.mktemp("cache")))
    yield c
    c.close()


class BadEnv:
    """The environment of tests/bad_inputs.h in Python: ``comm`` (2 ranks)
    and six poisoned buffers per rank, IN OUT NRM RES GAM SPR (lists by
    rank), with the counters zeroed; ``cache_dir`` for more communicators."""

    NAMES = ("IN", "OUT", "NRM", "RES", "GAM", "SPR")

    def __init__(self, comm, driver, buffers, cache_dir):
        self.comm, self.driver, self.buffers, self.cache_dir = comm, driver, buffers, cache_dir
        for i, name in enumerate(self.NAMES):
            setattr(self, name, [buffers.buf[r][i] for r in range(2)])
        driver.reset_stats()

    def assert_untouched(self):
        """Nothing was launched, copied or uploaded, and every buffer still
        holds only POISON."""
        s = self.driver.stats
        assert (s.launches, s.copies, s.uploads) == (0, 0, 0)
        assert self.buffers.written() == []


@pytest.fixture
def bad_env(comm2, driver, poisoned, cache_dir):
    """A fresh BadEnv over the module's 2-rank communicator."""
    return BadEnv(comm2, driver, poisoned(2, len(BadEnv.NAMES)), cache_dir)
