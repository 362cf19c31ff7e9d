"""``python -m daskscope.analysis.advice --write-docs docs/advice.md``: the rules' page."""

from __future__ import annotations

import argparse
from pathlib import Path

from daskscope.analysis.advice.docs import rules_markdown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write-docs", metavar="PATH", help="write the rules' page there")
    args = parser.parse_args()
    text = rules_markdown()
    if args.write_docs:
        Path(args.write_docs).write_text(text, encoding="utf-8")
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
