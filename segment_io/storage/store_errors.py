"""An object store client's errors as the OS errors the rest of segpipe reasons about, each naming
the object: PermissionError (denied: never retried), FileNotFoundError, FileExistsError (a
conditional create refused), TimeoutError (no answer in time), ConnectionError (the connection
dropped) and OSError (throttled, a server error: transient, retried). S3's client already raises
these; GCS's and Azure's raise some of their own, which are translated here, so every store's
error reads and is retried alike."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

# Azure's SDK (azure.core.exceptions) by class name: imported only with the azure extra.
AZURE_BY_CLASS: dict[str, type[OSError]] = {
    "ClientAuthenticationError": PermissionError,
    "ResourceNotFoundError": FileNotFoundError,
    "ResourceExistsError": FileExistsError,
    "ServiceRequestTimeoutError": TimeoutError,
    "ServiceResponseTimeoutError": TimeoutError,
    "ServiceRequestError": ConnectionError,
    "ServiceResponseError": ConnectionError,
}
# An HTTP status with a meaning of its own; any other error answer is transient (OSError).
BY_STATUS: dict[int, type[OSError]] = {
    401: PermissionError,
    403: PermissionError,
    404: FileNotFoundError,
    412: FileExistsError,
}
GCS_FORBIDDEN = "Forbidden: "  # gcsfs raises a 403 as a plain OSError whose text starts so


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _by_status(status: object) -> type[OSError]:
    return BY_STATUS.get(int(status), OSError) if str(status).isdigit() else OSError  # type: ignore[call-overload]


def _azure(exc: Exception, url: str) -> OSError | None:
    names = [c.__name__ for c in type(exc).__mro__]
    status = getattr(exc, "status_code", None)
    cls = next((AZURE_BY_CLASS[name] for name in names if name in AZURE_BY_CLASS), None)
    if cls is None:
        if "HttpResponseError" not in names:
            return None
        cls = _by_status(status)
    code = getattr(exc, "error_code", None)
    message = _first_line(str(getattr(exc, "message", None) or exc))
    reason = f"{code} ({message})" if code else message or type(exc).__name__
    return cls(f"{url}: {reason}" + (f" [HTTP {status}]" if status else ""))


def _gcs(exc: Exception, url: str) -> OSError | None:
    if isinstance(exc, TimeoutError):  # fsspec's FSTimeoutError, which says nothing
        return TimeoutError(f"{url}: no answer from the store in time")
    text = str(exc)
    if type(exc) is OSError and text.startswith(GCS_FORBIDDEN):  # the store's words on the next line
        return PermissionError(f"{url}: {_first_line(text.partition(chr(10))[2]) or 'Forbidden'} [HTTP 403]")
    if type(exc).__name__ == "HttpError" and type(exc).__module__.startswith("gcsfs"):
        status = getattr(exc, "code", None)
        return _by_status(status)(f"{url}: {_first_line(text)} [HTTP {status}]")
    return None


def as_os_error(exc: Exception, url: str, gcs: bool) -> OSError | None:
    """`exc`, raised by a store's client for `url` (`gcs`: by gcsfs), as the OS error it means;
    None where it is one already, or no store's at all."""
    # adlfs raises some of Azure's errors inside its own (RuntimeError, ValueError): the cause says.
    for error in (exc, exc.__cause__):
        if isinstance(error, Exception) and type(error).__module__.startswith("azure."):
            return _azure(error, url)
    return _gcs(exc, url) if gcs else None


@contextmanager
def store_errors(url: str, gcs: bool) -> Iterator[None]:
    """Within the block, a store client's own errors are raised as the OS errors they mean."""
    try:
        yield
    except Exception as exc:
        typed = as_os_error(exc, url, gcs)
        if typed is None:
            raise
        raise typed from exc
