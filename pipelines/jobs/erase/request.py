"""EraseRequest: everything one `erase` run is asked to do, in one frozen, keyword-only value."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipelines.config.key_formats import KEY_FORMATS
from pipelines.errors import ConfigError
from pipelines.log.scanned import ON_CORRUPT
from pipelines.output.destination import require_output
from segment_io.storage import Location
from segment_io.storage.location import locate

if TYPE_CHECKING:
    from pipelines.keys.key_digest import KeyDigest
    from pipelines.keys.key_list import KeyList
    from pipelines.keys.key_set import ErasedKeys


@dataclass(frozen=True, kw_only=True)
class EraseRequest:
    """An erase of the keys listed in `keys` (a file: see pipelines.keys.key_set) from the log
    directory `src` into `dst` (absent or empty).

    `header_names`: a record is also erased when a header of one of these names carries a listed
    key as its value. `topics`: a predicate on topic names; only those topics' partitions are
    erased from and reach `dst` (None: all). `validate`: publish only once the output is proved
    to be SRC minus exactly the listed keys' records (validate --erased). `checked`: the list of
    `keys` as the caller already checked it (key_list.checked_key_list), so that it is read once a
    run; None: the run reads and checks it. `digest`: how the evidence names keys, keyed by the
    operator's secret (key_digest.KeyDigest); None: by a secret made for the run and kept nowhere,
    so that the evidence confirms no key to anyone."""

    src: Location
    dst: Location | None  # None: erase --in-place, whose run writes into its tier's staging
    keys: str
    key_format: str = "utf8"
    header_names: tuple[str, ...] = ()
    topics: Callable[[str], bool] | None = None
    dry_run: bool = False
    report_path: Location | None = None
    on_corrupt: str = "fail"
    validate: bool = False
    checked: ErasedKeys | KeyList | None = None
    digest: KeyDigest | None = None

    def __post_init__(self) -> None:
        locate(self, "src", "dst", "report_path")
        if self.key_format not in KEY_FORMATS:
            raise ConfigError(f"key format {self.key_format!r}: expected one of {', '.join(KEY_FORMATS)}")
        if self.on_corrupt not in ON_CORRUPT:
            raise ConfigError(f"on_corrupt {self.on_corrupt!r}: expected one of {', '.join(ON_CORRUPT)}")

    @property
    def out(self) -> Location:
        """Where the erased log is written: DST, or the staging an in-place run gives its erase."""
        if self.dst is None:
            raise ConfigError("erase needs SRC and DST (or SRC --in-place for a remote tier)")
        return self.dst

    def refusals(self) -> None:
        """A destination inside the source or in use, a report file that exists."""

        require_output(self.src, self.out, self.report_path)
