"""Which destinations a job may write: absent or empty, never inside its source; report files
that do not exist yet."""

from __future__ import annotations

from pipelines.errors import DestinationExists, DestinationInsideSource
from pipelines.output.staging import require_writable
from segment_io.storage import open_storage


def _location(url: str) -> tuple[str, str]:
    storage, path = open_storage(url)
    return storage.protocol, storage.canonical(path)


def require_destination(src_url: str, dst_url: str) -> None:
    """Refuse a destination inside the source (its output and staging would modify SRC, and a
    log directory holding a non-partition directory is one Kafka refuses to load; a tiered
    source is its local directory and its remote tier), not empty, or being written by a live
    run."""
    from segment_io.remote.view import sources_of

    for source in sources_of(src_url):
        require_outside(source, dst_url, "is never modified")
    require_writable(dst_url)


def require_output(src_url: str, dst_url: str, report_path: str | None) -> None:
    """What a job that writes a log directory refuses: a destination inside its source or in
    use, a report file that exists."""
    require_destination(src_url, dst_url)
    if report_path:
        require_new_file(report_path)


def require_outside(src_url: str, dst_url: str, why: str) -> None:
    """Refuse a destination at or inside the source (`why` says what the source must stay)."""
    (src_fs, src), (dst_fs, dst) = _location(src_url), _location(dst_url)
    if src_fs == dst_fs and (dst == src or dst.startswith(src.rstrip("/") + "/")):
        raise DestinationInsideSource(f"destination {dst_url} is inside the source {src_url}, which {why}")


def require_linkable(src_url: str, dst_url: str) -> None:
    """`--link` needs SRC and DST on one local file system (a hard link cannot cross file systems
    or reach an object store)."""
    import os

    from pipelines.errors import ConfigError

    if "://" in src_url or "://" in dst_url:
        raise ConfigError("--link hard-links local files: SRC and DST must both be local directories")
    parent = os.path.dirname(os.path.abspath(dst_url.rstrip("/"))) or "/"
    if not os.path.isdir(parent):
        raise ConfigError(f"--link: {parent} (DST's parent) does not exist")
    if os.stat(src_url).st_dev != os.stat(parent).st_dev:
        raise ConfigError(
            f"--link: {src_url} and {dst_url} are on different file systems; hard links cannot cross them"
        )


def require_new_file(url: str) -> None:
    """Refuse to overwrite a file (a report of another run, say)."""
    storage, path = open_storage(url)
    if storage.exists(path):
        raise DestinationExists(f"{url} exists; segpipe does not overwrite it")
