"""The `lowp` command line. Each command lives in lowp/commands/<name>.py with `add_parser(subparsers)`;
the parser it adds sets `func`, which takes the parsed args and returns the exit status."""
from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = ("isa", "emulate", "conformance", "bounds", "bench", "docs", "study", "peers")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lowp", description=__import__("lowp").__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"lowp.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"lowp.commands.{name}":
                raise
            continue
        module.add_parser(sub)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
