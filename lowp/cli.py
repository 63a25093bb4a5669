"""The `lowp` command line. Each command lives in lowp/commands/<name>.py with `add_parser(subparsers)`;
the parser it adds sets `func`, which takes the parsed args and returns the exit status.

One parser class (`Parser`) and one error path for every command: a usage error (an unknown option or choice, a
missing argument) prints the usage and a did-you-mean where a close name exists, and exits 2; a range such as
`--a -127:127` is a value, not an option; a closed pipe (`lowp isa list | head`) ends quietly."""
from __future__ import annotations

import argparse
import difflib
import importlib
import os
import re
import sys
import warnings

COMMANDS = ("isa", "emulate", "conformance", "fuzz", "bounds", "bench", "docs", "study", "peers", "xnnpack", "ggml", "prove")
# argparse takes '-127:127' for an option unless it looks like a negative number: ranges are values too.
NEGATIVE_VALUE = re.compile(r"^-\d+$|^-\d*\.\d+$|^-\d+:-?\d+$")
SIGPIPE_STATUS = 141          # what a shell reports for a program ended by SIGPIPE (128 + 13)


def suggest(name: str, choices) -> str:
    """' (did you mean X?)' for the closest of `choices`, or ''."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


class Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NEGATIVE_VALUE

    def usage_error(self, message: str):
        """Print the usage and `message`, exit 2: for a command's own checks of its arguments."""
        self.error(message)

    def input_error(self, message: str):
        """One line, `message` naming the input and what is wrong with its value, exit 2: the option was understood,
        its value cannot be used (the usage would only bury the line that matters)."""
        self.exit(2, f"{self.prog}: error: {message}\n")

    # A repeatable positional (dest) that takes values after options too: argparse fills `nargs="*"` once, so
    # `lowp conformance replay --kernels my.toml ID` would leave ID unrecognised.
    positionals_after_options: str | None = None

    def parse_known_args(self, args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        self._reject_unknown_options(args)
        namespace, extras = super().parse_known_args(args, namespace)
        if self.positionals_after_options:
            late = [a for a in extras if not a.startswith("-")]
            getattr(namespace, self.positionals_after_options).extend(late)
            extras = [a for a in extras if a.startswith("-")]
        return namespace, extras

    def _reject_unknown_options(self, args) -> None:
        """An option this parser does not know, before argparse reads it as a positional's value and reports
        something else ('invalid choice: X' for `--kernal X`)."""
        known = [s for s in self._option_string_actions if s.startswith("--")]
        for arg in args:
            if arg == "--":
                return
            if arg in self._subcommand_names():
                return                      # the rest is the subcommand's to judge
            if arg.startswith("--"):
                name = arg.split("=", 1)[0]
                if name not in known and not any(k.startswith(name) for k in known):
                    self.error(f"unknown option {name}{suggest(name, known)}")

    def _subcommand_names(self):
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return action.choices
        return {}

    def _check_value(self, action, value):
        if action.choices is not None and value not in action.choices:
            choices = ", ".join(map(repr, action.choices))
            raise argparse.ArgumentError(action, f"invalid choice: {value!r}{suggest(value, action.choices)} "
                                                 f"(choose from {choices})")


def seed(text: str) -> int:
    """argparse's type of every --seed: an integer >= 0 (numpy's generators take no other), refused in one line."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative: a seed is an integer >= 0")
    return value


def environment_problem() -> str | None:
    """What is wrong with lowp's environment variables (checked once, before any command runs), or None:
    LOWP_DISABLE_FEATURES naming a feature no target knows would otherwise disable nothing, silently."""
    from lowp.emulator.targets import disabled_features
    try:
        disabled_features()
    except ValueError as e:
        return str(e)
    return None


def build_parser() -> Parser:
    lowp = importlib.import_module("lowp")
    parser = Parser(prog="lowp", description=lowp.__doc__)
    parser.add_argument("--version", action="version", version=f"lowp {lowp.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"lowp.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"lowp.commands.{name}":
                raise
            continue
        module.add_parser(sub)
    _give_commands_their_parser(parser)
    return parser


def _give_commands_their_parser(parser: argparse.ArgumentParser) -> None:
    """args.parser: the (sub)command's own parser, so a command's checks of its arguments end as usage errors."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.set_defaults(parser=sub)
                _give_commands_their_parser(sub)


def _warning_line(message, category, filename, lineno, line=None) -> str:
    """lowp's own warnings (a cached file rebuilt, ...) as one line naming what they are about; others as Python
    prints them."""
    from lowp.emulator.buildcache import CacheWarning
    if issubclass(category, CacheWarning):
        return f"lowp: warning: {message}\n"
    return _python_formatwarning(message, category, filename, lineno, line)


_python_formatwarning = warnings.formatwarning


INTERRUPTED_STATUS = 130        # 128 + SIGINT, as a shell reports a command Ctrl-C stopped


def main(argv=None) -> int:
    from lowp.emulator.buildcache import CacheError
    warnings.formatwarning = _warning_line
    args = build_parser().parse_args(argv)
    problem = environment_problem()
    if problem:
        print(f"lowp: {problem}", file=sys.stderr)
        return 2
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()
    except CacheError as e:
        # The cache folder, or a file in it, cannot be used: one line naming it, before or instead of CRASH rows.
        print(f"lowp: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # Ctrl-C in a command that does not handle it itself (isa, emulate, docs, ...): one line, the shell's status
        # for SIGINT, no traceback. The campaign commands catch it first, to write what finished.
        print("lowp: interrupted", file=sys.stderr)
        return INTERRUPTED_STATUS
    except BrokenPipeError:
        # The reader went away (`| head`): no traceback, and no second error when Python flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return SIGPIPE_STATUS
    return status


if __name__ == "__main__":
    sys.exit(main())
