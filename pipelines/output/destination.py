"""Which destinations a job may write: absent or empty, never inside its source; report files
that do not exist yet."""

from __future__ import annotations

from pipelines.errors import ConfigError, DestinationExists, DestinationInsideSource
from pipelines.output.staging import require_writable
from segment_io.remote.view import described, sources_of
from segment_io.storage import Location, Place


def _canonical(place: Location) -> tuple[str, str]:
    return place.storage.protocol, place.storage.canonical(place.path)


def require_destination(src: Place, dst: Place) -> None:
    """Refuse a destination inside the source (its output and staging would modify SRC, and a
    log directory holding a non-partition directory is one Kafka refuses to load; a tiered
    source is its local directory and its remote tier), not empty, or being written by a live
    run."""

    src, dst = Location.of(src), Location.of(dst)
    sources = sources_of(src.url)
    for source in [src] if sources == [src.url] else [Location(s) for s in sources]:
        require_outside(source, dst, "is never modified")
    require_writable(dst)


def require_output(src: Place, dst: Place, report: Place | None) -> None:
    """What a job that writes a log directory refuses: a destination inside its source or in
    use, a report file that exists."""
    require_destination(src, dst)
    if report:
        require_new_file(report)


def require_outside(src: Place, dst: Place, why: str) -> None:
    """Refuse a destination at or inside the source (`why` says what the source must stay)."""
    src, dst = Location.of(src), Location.of(dst)
    (src_fs, src_path), (dst_fs, dst_path) = _canonical(src), _canonical(dst)
    if src_fs == dst_fs and (dst_path == src_path or dst_path.startswith(src_path.rstrip("/") + "/")):
        raise DestinationInsideSource(
            f"destination {dst} is inside the source {described(src.url)}, which {why}"
        )


def require_linkable(src: Place, dst: Place) -> None:
    """`--link` needs SRC and DST on one local file system (a hard link cannot cross file systems
    or reach an object store)."""
    import os

    src_url, dst_url = str(src), str(dst)
    if "://" in src_url or "://" in dst_url:
        raise ConfigError("--link hard-links local files: SRC and DST must both be local directories")
    parent = os.path.dirname(os.path.abspath(dst_url.rstrip("/"))) or "/"
    if not os.path.isdir(parent):
        raise ConfigError(f"--link: {parent} (DST's parent) does not exist")
    if os.stat(src_url).st_dev != os.stat(parent).st_dev:
        raise ConfigError(
            f"--link: {src_url} and {dst_url} are on different file systems; hard links cannot cross them"
        )


def require_new_file(file: Place) -> None:
    """Refuse to overwrite a file (a report of another run, say)."""
    file = Location.of(file)
    if file.exists():
        raise DestinationExists(f"{file} exists; segpipe does not overwrite it")
