"""Server memory under large valid ingest batches: peak and after-RSS of a real
``daskscope serve`` process.

For each database (SQLite, a throwaway PostgreSQL) and each source tree (this checkout,
or ``--after DIR``; and with ``--before DIR`` another one to compare, e.g. made with
``git archive HEAD src tests bench | tar -x -C DIR``), one after the other, starts ``daskscope serve
--auth`` of that tree in its own process (its batches encoded, its database made, by
that tree's code) and posts, all at once:

- ``one``: one maximum-size batch (31 MiB, about 80,000 records: task groups, fine
  metrics and worker samples, as a busy collector sends), alone;
- ``six``: six maximum-size batches from one member;
- ``mix``: from three members of three accounts at once, each two maximum-size batches,
  one batch of 24 large events (1 MiB of text each) and ten 501-record batches.

``--limit-mib 16`` runs the servers with ``ingest.max-batch-bytes`` of 16 MiB, and
maximum-size batches (and the large events) sized to it.

It samples the server's resident memory (RSS) every 10 ms and prints it at rest (after a
first small batch), its peak while the batches are taken, and 5 s after the last answer;
every batch must be answered 200 and every record stored. Ends with one line of JSON.

    python bench/ingest_memory.py [--databases sqlite,postgres] [--scenarios one,six,mix]
                                  [--before DIR] [--after DIR] [--rounds 1] [--limit-mib 32]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pickle
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

#: The tree whose test factories and load mix encode the batches: the one under test
#: (its records' fields), set for the child that encodes them
sys.path.insert(0, os.environ.get("INGEST_MEMORY_TREE", str(Path(__file__).parents[1])) + "/tests")
sys.path.insert(0, os.environ.get("INGEST_MEMORY_TREE", str(Path(__file__).parents[1])) + "/bench")
from daskscope.wire import encode_batch
from factories import make_cluster, make_event
from ingest_load import SEQ, Load, batch_template
from pgserver import PostgresServer, free_port

MIB = 2**20
#: the server's ``ingest.max-batch-bytes`` in MiB (``--limit-mib``; 32 by default): a
#: maximum-size batch is 1 MiB less
LIMIT_MIB = 32
SETTLE_S = 5.0


def _run_cli(source: str | None, database: str, *args: str) -> str:
    env = dict(os.environ)
    if source:
        env["PYTHONPATH"] = source
    command = [sys.executable, "-m", "daskscope.cli.main", "--database", database, *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {done.stderr[-2000:]}")
    return done.stdout


def members(source: str | None, database: str, accounts: int) -> list[str]:
    """``accounts`` accounts of one member each, created by the server's own code (its
    migrations); their tokens."""
    tokens = []
    for i in range(accounts):
        _run_cli(source, database, "account", "create", f"acct{i}")
        _run_cli(source, database, "user", "add", f"member{i}", "--account", f"acct{i}")
        tokens.append(_run_cli(source, database, "token", "create", "--user", f"member{i}"))
    return [t.splitlines()[0].strip() for t in tokens]


def start_server(source: str | None, database: str, port: int, log: Path) -> subprocess.Popen:
    env = dict(os.environ, DASK_DASKSCOPE__INGEST__MAX_BATCH_BYTES=str(LIMIT_MIB * MIB))
    if source:
        env["PYTHONPATH"] = source
    command = [sys.executable, "-m", "daskscope.cli.main", "--database", database]
    command += ["serve", "--host", "127.0.0.1", "--port", str(port), "--auth"]
    process = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"the server did not start: {log.read_text()[-2000:]}")


def big_events(cluster: int) -> bytes:
    """Events of 1 MiB of text each, 24 (three quarters of the limit): few records,
    large strings."""
    cid = f"load-cluster-{cluster:03d}"
    text = "x" * MIB
    records: list[Any] = [make_cluster(f"load {cluster}", id=cid, account="x", user="y")]
    records += [
        make_event(cid, "note", id=f"{cid}-big-{i}-{SEQ}", detail={"text": text})
        for i in range(LIMIT_MIB * 3 // 4)
    ]
    return encode_batch(records)


class Batches:
    """Bodies with fresh ids each (``SEQ`` replaced), so that every record is new."""

    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()

    def fresh(self, template: bytes) -> bytes:
        with self.lock:
            self.count += 1
            seq = self.count
        return template.replace(SEQ.encode(), f"{seq:010d}".encode())


def largest(member: int) -> bytes:
    """A batch of the load mix of just under 31 MiB (records differ in size between
    versions of the code: as many as that takes)."""
    records, most = 78_000, (LIMIT_MIB - 1) * MIB
    while True:
        body = batch_template(member, Load(batch_records=records))
        if most - MIB // 4 <= len(body) <= most:
            return body
        records = int(records * (most - MIB // 8) / len(body))


def scenario(name: str) -> list[tuple[int, bytes]]:
    """(member, template) of every batch the scenario posts at once."""
    small = Load(batch_records=501)
    if name == "warm":
        return [(0, batch_template(99, small).replace(SEQ.encode(), b"warm000000"))]
    if name == "one":
        return [(0, largest(0))]
    if name == "six":
        return [(0, largest(0))] * 6
    if name == "mix":
        posts = []
        for member in range(3):
            posts += [(member, largest(member))] * 2
            posts += [(member, big_events(member))]
            posts += [(member, batch_template(member, small))] * 10
        return posts
    raise SystemExit(f"unknown scenario {name!r}: one, six or mix")


def templates(source: str | None, name: str, out: Path) -> list[tuple[int, bytes]]:
    """The scenario's batches as the code under test encodes them (its record fields)."""
    env = dict(os.environ)
    if source:
        env["PYTHONPATH"] = source
        env["INGEST_MEMORY_TREE"] = str(Path(source).parent)
    command = [sys.executable, __file__, "--encode", name, "--out", str(out)]
    command += ["--limit-mib", str(LIMIT_MIB)]
    subprocess.run(command, env=env, check=True)
    with out.open("rb") as f:
        loaded: list[tuple[int, bytes]] = pickle.load(f)
    out.unlink()
    return loaded


def rss(pid: int) -> int:
    return int(psutil.Process(pid).memory_info().rss)


def post_all(url: str, posts: list[tuple[str, bytes]], server: int) -> dict[str, Any]:
    batches = Batches()
    bodies = [(token, batches.fresh(template)) for token, template in posts]
    peak = rss(server)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss(server))
            time.sleep(0.01)

    def one(item: tuple[str, bytes]) -> tuple[int, int]:
        token, body = item
        headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
        response = httpx.post(f"{url}/api/v1/ingest", content=body, headers=headers, timeout=900)
        stored = response.json().get("records", 0) if response.status_code == 200 else 0
        return response.status_code, stored

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(len(bodies)) as pool:
        answers = list(pool.map(one, bodies))
    elapsed = time.perf_counter() - started
    done.set()
    sampler.join()
    time.sleep(SETTLE_S)  # what the server keeps once it is idle again
    return {
        "batches": len(bodies),
        "mib_posted": round(sum(len(b) for _, b in bodies) / MIB),
        "statuses": sorted({status for status, _ in answers}),
        "records": sum(stored for _, stored in answers),
        "seconds": round(elapsed, 1),
        "peak_mib": round(peak / MIB),
        "after_mib": round(rss(server) / MIB),
    }


def measure(source: str | None, label: str, database: str, name: str, log: Path) -> dict:
    tokens = members(source, database, 3)
    posts = [(tokens[m], t) for m, t in templates(source, name, log.with_suffix(".pickle"))]
    warm = templates(source, "warm", log.with_suffix(".pickle"))[0][1]
    port = free_port()
    server = start_server(source, database, port, log)
    url = f"http://127.0.0.1:{port}"
    try:
        # warm up: imports, the token cache, the first write
        headers = {"authorization": f"Bearer {tokens[0]}", "content-type": "application/json"}
        first = httpx.post(f"{url}/api/v1/ingest", content=warm, headers=headers, timeout=60)
        if first.status_code != 200:
            raise SystemExit(f"the first batch was refused: {first.status_code} {first.text}")
        time.sleep(1)
        rest = rss(server.pid)
        result = post_all(url, posts, server.pid)
    finally:
        died = server.poll()
        server.terminate()
        server.wait(30)
    if died is not None:
        raise SystemExit(f"the server died (exit {died}): {log.read_text()[-3000:]}")
    return {"code": label, "scenario": name, "limit_mib": LIMIT_MIB, "rest_mib": round(rest / MIB),
            **result}  # fmt: skip


def on_database(kind: str, tmp: Path, run: Any) -> list[dict]:
    if kind == "sqlite":
        return run(lambda n: f"sqlite:///{tmp / f'{n}.db'}")
    if kind != "postgres":
        raise SystemExit(f"unknown database {kind!r}: sqlite or postgres")
    pg = PostgresServer()
    pg.start()
    try:
        import psycopg

        def create(n: str) -> str:
            admin = f"postgresql://postgres@127.0.0.1:{pg.port}/postgres"
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE {n}")
            return f"{pg.url}/{n}"

        return run(create)
    finally:
        pg.remove()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument("--scenarios", default="one,six,mix")
    parser.add_argument("--before", metavar="DIR", help="a source tree (its src/) to compare")
    parser.add_argument(
        "--after", metavar="DIR", help="a source tree to measure instead of this checkout"
    )
    parser.add_argument("--rounds", type=int, default=1, help="each measurement this often")
    parser.add_argument(
        "--limit-mib", type=int, default=32, help="the server's ingest.max-batch-bytes, MiB"
    )
    parser.add_argument("--encode", help=argparse.SUPPRESS)  # a child: write templates
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    global LIMIT_MIB
    LIMIT_MIB = args.limit_mib
    if args.encode:
        with open(args.out, "wb") as f:
            pickle.dump(scenario(args.encode), f)
        return
    sources: list[tuple[str, str | None]] = [("this", None)]
    if args.after:
        sources = [("after", str(Path(args.after).resolve() / "src"))]
    if args.before:
        sources.insert(0, ("before", str(Path(args.before).resolve() / "src")))
    results: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        for kind in args.databases.split(","):

            def run(new_database: Any, kind: str = kind) -> list[dict]:
                out = []
                for round_ in range(args.rounds):
                    for name in args.scenarios.split(","):
                        for label, source in sources:  # side by side, one after the other
                            n = f"{kind[:2]}_{label}_{name}_{round_}"
                            r = measure(source, label, new_database(n), name, tmp / f"{n}.log")
                            r["database"] = kind
                            print(_line(r), flush=True)
                            out.append(r)
                return out

            results += on_database(kind, tmp, run)
    load_average = [round(x, 2) for x in os.getloadavg()]
    print(f"load average at the end: {load_average} on {os.cpu_count()} cores")
    print(json.dumps({"cpu_count": os.cpu_count(), "load_average": load_average,
                      "results": results}))  # fmt: skip


def _line(r: dict) -> str:
    return (
        f"{r['database']:>8} {r['code']:>6} {r['scenario']:>4} (limit {r['limit_mib']} MiB):"
        f" {r['batches']} batches,"
        f" {r['mib_posted']} MiB, {r['records']:,} records stored, statuses {r['statuses']},"
        f" {r['seconds']} s | RSS at rest {r['rest_mib']} MiB, peak {r['peak_mib']} MiB,"
        f" after {r['after_mib']} MiB"
    )


if __name__ == "__main__":
    main()
