"""``python -m daskscope.catalogue --write-docs docs/metrics.md``: the docs' tables from
the catalogue (``--check`` fails instead of writing when they differ)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from daskscope.catalogue.docs import render_docs, write_docs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m daskscope.catalogue")
    parser.add_argument("--write-docs", metavar="PATH", help="rewrite the tables of PATH")
    parser.add_argument("--check", metavar="PATH", help="exit 1 if PATH's tables are stale")
    args = parser.parse_args(argv)
    if args.write_docs:
        changed = write_docs(args.write_docs)
        print(f"{args.write_docs}: {'written' if changed else 'already up to date'}")
    if args.check:
        text = Path(args.check).read_text(encoding="utf-8")
        if render_docs(text) != text:
            print(f"{args.check} is stale: python -m daskscope.catalogue --write-docs {args.check}")
            return 1
    if not (args.write_docs or args.check):
        parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
