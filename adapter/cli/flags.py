"""Miles-style command-line flags: the typed ones a user commonly needs, and a passthrough.

Typed flags (the flag table's rows with a help text) keep Miles' spelling and value type and
default to ``argparse.SUPPRESS``, so a parsed namespace holds only what the user typed. Every
other flag Miles defines passes through to ``args.flag``; one Miles does not define is refused,
as Miles' own parser would, unless ``--extra-miles-flag NAME`` lets it through.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from miles_verifiers.episodes.v02.upstream import known_option_strings
from miles_verifiers.errors import CommandLineError
from miles_verifiers.trainer.miles_flags import MILES_FLAG_NAMES, MILES_FLAGS, MilesFlag

PASSTHROUGH_DEST = "miles_passthrough"
EXTRA_FLAGS_DEST = "extra_miles_flags"
EXTRA_FLAGS_OPTION = "--extra-miles-flag"

_FLAG_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]*(-[A-Za-z0-9]+)*$")


class PassthroughError(CommandLineError, ValueError):
    """The free-form part of the command line cannot be read as ``--flag [value ...]`` pairs."""


TYPED_FLAGS: tuple[MilesFlag, ...] = tuple(row for row in MILES_FLAGS if row.help is not None)


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not valid JSON ({error.msg})") from error


def _json_object(text: str) -> dict[str, Any]:
    value = _json_value(text)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(
            f"expected a JSON object such as '{{\"enable_thinking\": false}}', "
            f"got a JSON {type(value).__name__}"
        )
    return value


_TYPES: Mapping[str, Callable[[str], Any]] = {
    "int": int,
    "float": float,
    "str": str,
    "json": _json_value,
    "json_object": _json_object,
}


def add_miles_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every typed flag to ``parser``, in a 'Miles options' group."""
    group = parser.add_argument_group(
        "Miles options",
        "Spelled and typed as in Miles; any other flag Miles defines (or one named with "
        "--extra-miles-flag) is passed through as --flag [value ...] to "
        "args.flag (dashes become underscores; a value is read as JSON when it parses, else "
        "as text; a bare flag is True, a bare --disable-x sets x to False).",
    )
    for spec in TYPED_FLAGS:
        common: dict[str, Any] = {
            "dest": spec.dest,
            "default": argparse.SUPPRESS,
            "help": spec.help,
        }
        if spec.kind in ("true", "false"):
            group.add_argument(spec.option, action=f"store_{spec.kind}", **common)
            continue
        kind = spec.kind.removesuffix("s")  # "ints", "strs": one or more values
        if kind != spec.kind:
            common["nargs"] = "+"
        group.add_argument(spec.option, type=_TYPES[kind], metavar=kind.upper(), **common)


def given_miles_flags(namespace: argparse.Namespace) -> dict[str, Any]:
    """The typed Miles flags the user actually gave, by ``args`` attribute."""
    return {f.dest: getattr(namespace, f.dest) for f in TYPED_FLAGS if hasattr(namespace, f.dest)}


def parse_scalar(text: str) -> Any:
    """A passthrough value: JSON when it parses (numbers, true/false/null, lists, objects),
    otherwise the text itself (paths, model ids, names)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _split_flag(token: str) -> tuple[str, str | None]:
    if not token.startswith("--") or token == "--":
        raise PassthroughError(
            f"unexpected argument {token!r}: Miles options are written --flag [value ...] and "
            "this command takes no positional arguments."
        )
    name, equals, inline = token[2:].partition("=")
    if "_" in name:
        raise PassthroughError(
            f"--{name}: Miles flags are spelled with dashes; write --{name.replace('_', '-')}."
        )
    if not _FLAG_NAME.match(name):
        # Only the name: the text after '=' may be a credential.
        raise PassthroughError(f"--{name} is not a valid flag name.")
    return name, inline if equals else None


def parse_passthrough(tokens: Sequence[str]) -> dict[str, Any]:
    """Read ``--flag [value ...]`` groups into ``{attribute: value}``: no value gives True
    (``--disable-x`` also sets ``x = False``, as Miles' store_false flags do), one value that
    value, several a list. A flag given twice is an error."""
    parsed: dict[str, Any] = {}
    seen: set[str] = set()
    index = 0
    while index < len(tokens):
        name, inline = _split_flag(tokens[index])
        index += 1
        values: list[str] = []
        if inline is not None:
            values.append(inline)
        else:
            while index < len(tokens) and not tokens[index].startswith("--"):
                values.append(tokens[index])
                index += 1
        if name in seen:
            raise PassthroughError(f"--{name} is given more than once.")
        seen.add(name)
        parsed.update(_passthrough_values(name, values))
    return parsed


def _passthrough_values(name: str, values: Sequence[str]) -> dict[str, Any]:
    attribute = name.replace("-", "_")
    if not values:
        if name.startswith("disable-"):
            return {attribute: True, attribute.removeprefix("disable_"): False}
        return {attribute: True}
    if len(values) == 1:
        return {attribute: parse_scalar(values[0])}
    return {attribute: [parse_scalar(v) for v in values]}


def normalize_flag_name(name: str) -> str:
    """``--Some_Flag`` and ``some-flag`` alike as ``some-flag``."""
    return name.strip().lstrip("-").replace("_", "-").lower()


def unknown_flags_message(
    tokens: Sequence[str], known: Iterable[str], extra: Iterable[str] = ()
) -> str | None:
    """Why the passthrough ``tokens`` cannot be used, or None when every flag is Miles', one
    of ``known`` (this command's own) or of ``extra`` (named with ``--extra-miles-flag``)."""
    own = {normalize_flag_name(name) for name in known}
    allowed = MILES_FLAG_NAMES | own | {normalize_flag_name(name) for name in extra}
    candidates = sorted(MILES_FLAG_NAMES | own)
    names = [t[2:].partition("=")[0] for t in tokens if t.startswith("--") and t != "--"]
    unknown = [
        name
        for name in dict.fromkeys(names)  # each name once, in order
        # a known flag misspelled with underscores is reported by the passthrough parser
        if normalize_flag_name(name) not in allowed
    ]
    if not unknown:
        return None
    described = []
    for name in unknown:
        close = difflib.get_close_matches(normalize_flag_name(name), candidates, n=1)
        described.append(f"--{name}" + (f" (did you mean --{close[0]}?)" if close else ""))
    escape = normalize_flag_name(unknown[0]) if len(unknown) == 1 else "NAME"
    return (
        f"unknown flag{'s' if len(unknown) > 1 else ''} {', '.join(described)}. Miles' own "
        "parser refuses flags it does not define, so this command does too rather than "
        f"ignore them. Fix the spelling, or, for a flag of a newer Miles, add "
        f"{EXTRA_FLAGS_OPTION} {escape} (once per flag) to pass it through as it is."
    )


def accept_passthrough(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Make ``parser`` keep unknown ``--flag`` tokens at :data:`PASSTHROUGH_DEST` (argparse
    would hand a sub-parser's leftovers to the top-level parser, which fails on them), once
    each is known to Miles or named with ``--extra-miles-flag``, else exit 2 with the usage.
    ``allow_abbrev`` must be off, or argparse would expand unknown prefixes of known flags."""
    if parser.allow_abbrev:
        raise ValueError("a passthrough parser needs allow_abbrev=False")
    original = parser.parse_known_args

    def parse_known_args(
        args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = original(args, namespace)
        problem = unknown_flags_message(
            extras,
            known=known_option_strings(parser),
            extra=getattr(parsed, EXTRA_FLAGS_DEST, None) or [],
        )
        if problem:
            parser.error(problem)  # exits 2 with the usage line, before anything runs
        previous: list[str] = list(getattr(parsed, PASSTHROUGH_DEST, None) or [])
        setattr(parsed, PASSTHROUGH_DEST, previous + list(extras))
        return parsed, []

    parser.parse_known_args = parse_known_args  # type: ignore[method-assign, assignment]
    return parser
