"""The arguments of the commands that read a key list (erase, validate --erased): its format, the
headers that also carry a key, the topics, the evidence's secret."""

from __future__ import annotations

import argparse

from pipelines.config.key_formats import KEY_FORMATS


def add_key_arguments(p: argparse.ArgumentParser, proving: bool = False) -> None:
    """How the key list is read, which headers also name a record's key, which topics, and the
    secret of the evidence's digests; `proving`: said as validate --erased proves an erase."""
    p.add_argument(
        "--key-format",
        choices=KEY_FORMATS,
        default="utf8",
        help="how a key is written in a text list, or in a string `key` column (default utf8: its bytes)",
    )
    p.add_argument(
        "--also-in-headers",
        action="append",
        default=[],
        metavar="NAME",
        help=(
            "the erase also removed a record whose header NAME carries a listed key as its value; repeat "
            "for more (give the erase's own)"
            if proving
            else "also erase a record when its header NAME carries a listed key as its value; repeat for more"
        ),
    )
    p.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="PATTERN",
        help=(
            "prove only these topics of SRC (those the erase was given): a name or a glob; repeat for more "
            "(default: all)"
            if proving
            else "erase from and keep only these topics in DST: a name or a glob; repeat for more "
            "(default: all)"
        ),
    )
    p.add_argument(
        "--secret-file",
        metavar="FILE",
        help=(
            "the secret the erase's evidence was keyed with: also check that its report names exactly "
            "the listed keys"
            if proving
            else "a file holding a secret of at least 16 bytes the evidence names keys under "
            "(HMAC-SHA-256), so that only its holder can match a key against the report; keep it apart "
            "from the reports (default: a secret made for the run and kept nowhere)"
        ),
    )
