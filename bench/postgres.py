"""Start (or stop) a throwaway PostgreSQL server for the benchmarks, the way the tests
do (``tests/pgserver.py``: Debian's server binaries, a temporary directory, no fsync).

    python bench/postgres.py start        # prints the URL and the directory, keeps running
    python bench/postgres.py stop DIR     # stops it and removes DIR

Then ``python bench/seed.py URL`` and ``python bench/dashboard_latency.py URL``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from pgserver import PostgresServer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("root", nargs="?", help="the server's directory (stop)")
    args = parser.parse_args()
    if args.action == "start":
        server = PostgresServer(detached=True)  # it outlives this script
        server.start()
        print(server.url)
        print(server.root, file=sys.stderr)
        return
    if not args.root:
        parser.error("stop needs the directory that start printed")
    server = PostgresServer.__new__(PostgresServer)
    server.root = Path(args.root)
    server.data = server.root / "data"
    server.remove()


if __name__ == "__main__":
    main()
