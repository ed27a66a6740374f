"""One rank of a test_bootstrap.py communicator, run as its own process.

    rank_process.py uid NRANKS RANK ID_TEXT
    rank_process.py allgather NRANKS RANK EXCHANGE_DIR

Joins with ``Communicator.init_rank`` (the unique id, or ``allgather=``
through files in EXCHANGE_DIR), runs one allreduce of 1000 bf16 on
stand-in memory and prints one JSON line of what it saw; a collgen error
is printed as {"error": [class name, message]} with exit status 3.
Environment: COLLGEN_LIBRARY, COLLGEN_CUDA_LIBRARY, RANK_CACHE_DIR,
RANK_TIMEOUT_MS.
"""

import json
import os
import sys
import time

import collgen
from fakecuda import StandIn


class FileExchange:
    """An application all-gather over files: call k of rank r writes
    ``k.r`` (atomically, by rename) and waits, bounded, for every rank's."""

    def __init__(self, directory, nranks, rank, timeout_s=30.0):
        self.directory, self.nranks, self.rank, self.timeout_s = directory, nranks, rank, timeout_s
        self.calls = 0

    def __call__(self, mine):
        k, self.calls = self.calls, self.calls + 1
        path = os.path.join(self.directory, f"{k}.{self.rank}")
        with open(path + ".tmp", "wb") as f:
            f.write(mine)
        os.rename(path + ".tmp", path)
        deadline = time.monotonic() + self.timeout_s
        paths = [os.path.join(self.directory, f"{k}.{r}") for r in range(self.nranks)]
        while not all(os.path.exists(p) for p in paths):
            if time.monotonic() > deadline:
                raise TimeoutError(f"exchange {k}: not every rank wrote within {self.timeout_s} s")
            time.sleep(0.002)
        parts = []
        for p in paths:
            with open(p, "rb") as f:
                parts.append(f.read())
        return parts


def main(mode, nranks, rank, arg):
    """Runs the rank; returns the process exit status."""
    driver = StandIn(os.environ["COLLGEN_CUDA_LIBRARY"])
    options = {"cache_dir": os.environ["RANK_CACHE_DIR"],
               "timeout_ms": int(os.environ["RANK_TIMEOUT_MS"])}
    started = time.monotonic()
    try:
        if mode == "uid":
            comm = collgen.Communicator.init_rank(nranks, rank, arg, device=rank, **options)
        else:
            exchange = FileExchange(arg, nranks, rank)
            comm = collgen.Communicator.init_rank(nranks, rank, device=rank, allgather=exchange,
                                                  **options)
    except collgen.Error as e:
        print(json.dumps({"error": [type(e).__name__, e.message],
                          "seconds": time.monotonic() - started}))
        return 3
    info = comm.info()
    nbytes = 1000 * 2
    src, dst = driver.alloc(rank, nbytes), driver.alloc(rank, nbytes)
    data = os.urandom(nbytes)
    driver.write(src, data)
    driver.reset_stats()
    comm.all_reduce(src, dst, shape=(1000,), dtype="bf16")
    print(json.dumps({
        "nranks": info["nranks"], "route": {str(k): v for k, v in info["route"].items()},
        "host": info["host"], "launches": driver.stats.launches,
        "wrong_context": driver.stats.wrong_context,
        "input_kept": driver.read(src, nbytes) == data,
        "exchanges": exchange.calls if mode == "allgather" else None}))
    comm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]))
