"""Location: a place in storage named by a URL, opened once. A run's request holds its places as
Locations, so every check and stage of the run reads the same storage object (one fsspec client,
one tiered view) instead of opening the URL again wherever it is needed."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from segment_io.storage.base import Storage
from segment_io.storage.opening import open_storage


@dataclass(frozen=True)
class Location:
    """`url` (a local path, `s3://bucket/prefix`, `tiered:...`) and, on first use, its storage and
    the path inside it. Opening is deferred to first use because opening some URLs reads them (a
    remote tier's marker): a request names its places before its refusals run. Two Locations are
    equal when their URLs are; a Location crosses to a Spark worker as its URL and is opened there."""

    url: str
    _preset: tuple[Storage, str] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, place: str | Location) -> Location:
        """`place` as a Location (a URL string is named, not opened)."""
        return place if isinstance(place, Location) else cls(place)

    @classmethod
    def of_optional(cls, place: str | Location | None) -> Location | None:
        """`place` as a Location, None (or an empty string: no place given) as None."""
        return cls.of(place) if place else None

    @classmethod
    def at(cls, storage: Storage, path: str) -> Location:
        """The Location of `path` on an already opened `storage` (a place whose `storage.url(path)`
        opens it again where it travels: a disk or an object store, not a path inside a tiered
        view, which has no URL of its own)."""
        return cls(storage.url(path), (storage, path))

    @cached_property
    def _opened(self) -> tuple[Storage, str]:
        if self._preset is not None:
            return self._preset
        return open_storage(self.url)

    @property
    def storage(self) -> Storage:
        return self._opened[0]

    @property
    def path(self) -> str:
        """The path inside `storage` (a local path made absolute)."""
        return self._opened[1]

    @property
    def near(self) -> bool:
        """Whether this process reads the place at disk speed (`Storage.near`)."""
        return self.storage.near

    def file(self, *names: str) -> str:
        """The path of `names` under this place, on `storage`."""
        return posixpath.join(self.path, *names)

    def child(self, *names: str) -> Location:
        """The Location of `names` under this place, on the same opened storage."""
        return Location.at(self.storage, self.file(*names))

    def exists(self) -> bool:
        return self.storage.exists(self.path)

    def __str__(self) -> str:
        return self.url

    def __reduce__(self) -> tuple[Any, ...]:
        # Opened storage holds clients and caches that belong to this process.
        return (Location, (self.url,))


# What a function that reads or writes a place takes: a job hands down its opened Location, a
# caller with only a URL passes the string.
Place = str | Location


def locate(value: Any, *names: str) -> None:
    """For a frozen request's `__post_init__`: each named field given as a URL string (the Python
    API's plain form) becomes its Location; None stays None."""
    for name in names:
        place = getattr(value, name)
        if isinstance(place, str):
            object.__setattr__(value, name, Location(place))
