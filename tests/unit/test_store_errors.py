"""A store client's own errors read as the OS errors segpipe reasons about, naming the object:
denied is PermissionError (never retried), gone FileNotFoundError, throttled or a server error a
transient OSError, no answer in time TimeoutError, a dropped connection ConnectionError. The
errors are the clients' own classes, made as the clients make them."""

from __future__ import annotations

import pytest

from segment_io.remote.tier import retrying
from segment_io.storage.store_errors import as_os_error, store_errors

URL = "az://archive/src/clicks-0/00000000000000000000.log"


class _Response:
    """What azure-core's HttpResponseError reads of a response: its status and reason."""

    def __init__(self, status: int, reason: str) -> None:
        self.status_code = status
        self.reason = reason
        self.headers: dict[str, str] = {}

    def text(self) -> str:
        return ""


def _azure(
    cls_name: str, status: int | None = None, code: str | None = None, message: str = "refused"
) -> Exception:
    from azure.core import exceptions

    cls = getattr(exceptions, cls_name)
    if status is None:
        return cls(message)  # type: ignore[no-any-return]
    exc = cls(message=message, response=_Response(status, "Reason"))
    exc.error_code = code
    return exc  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("cls_name", "status", "code", "expected"),
    [
        ("HttpResponseError", 403, "AuthorizationPermissionMismatch", PermissionError),
        ("ClientAuthenticationError", 403, "AuthenticationFailed", PermissionError),
        ("ResourceNotFoundError", 404, "BlobNotFound", FileNotFoundError),
        ("HttpResponseError", 404, "ContainerNotFound", FileNotFoundError),
        ("ResourceExistsError", 409, "BlobAlreadyExists", FileExistsError),
        ("HttpResponseError", 503, "ServerBusy", OSError),
        ("HttpResponseError", 500, "InternalError", OSError),
        ("ServiceResponseTimeoutError", None, None, TimeoutError),
        ("ServiceRequestTimeoutError", None, None, TimeoutError),
        ("ServiceResponseError", None, None, ConnectionError),
        ("ServiceRequestError", None, None, ConnectionError),
    ],
)
def test_azure_errors_are_typed_and_name_the_object(
    cls_name: str, status: int | None, code: str | None, expected: type[OSError]
) -> None:
    typed = as_os_error(_azure(cls_name, status, code), URL, gcs=False)
    assert type(typed) is expected
    assert str(typed).startswith(f"{URL}: ")
    if code is not None:
        assert code in str(typed) and f"HTTP {status}" in str(typed)


def test_an_azure_error_inside_adlfs_own_is_typed_by_its_cause() -> None:
    """adlfs raises a refused block upload as RuntimeError("Failed to upload block: ...") from it."""
    cause = _azure("HttpResponseError", 403, "AuthorizationPermissionMismatch")
    try:
        raise RuntimeError(f"Failed to upload block: {cause}!") from cause
    except RuntimeError as wrapped:
        typed = as_os_error(wrapped, URL, gcs=False)
    assert type(typed) is PermissionError and "AuthorizationPermissionMismatch" in str(typed)
    assert as_os_error(RuntimeError("no running event loop"), URL, gcs=False) is None


def test_gcs_errors_are_typed_and_name_the_object() -> None:
    from fsspec.exceptions import FSTimeoutError
    from gcsfs.retry import HttpError

    url = "gs://archive/src/x.log"
    denied = as_os_error(
        OSError("Forbidden: http://host/upload/storage/v1/b/archive/o\nno access"), url, gcs=True
    )
    assert type(denied) is PermissionError and str(denied) == f"{url}: no access [HTTP 403]"
    throttled = as_os_error(HttpError({"code": 429, "message": "rateLimitExceeded"}), url, gcs=True)
    assert (
        type(throttled) is OSError and "rateLimitExceeded" in str(throttled) and "HTTP 429" in str(throttled)
    )
    timed_out = as_os_error(FSTimeoutError(), url, gcs=True)
    assert type(timed_out) is TimeoutError and str(timed_out) == f"{url}: no answer from the store in time"
    assert as_os_error(FileNotFoundError(url), url, gcs=True) is None  # already what it means
    assert as_os_error(ValueError("a bug"), url, gcs=True) is None  # not a store's error: unchanged
    assert as_os_error(OSError("Forbidden: x"), url, gcs=False) is None  # only gcsfs words it so


def test_the_retries_stop_at_a_refusal_and_ride_out_a_throttle() -> None:
    calls: list[int] = []

    def denied() -> None:
        calls.append(1)
        with store_errors(URL, gcs=False):
            raise _azure("HttpResponseError", 403, "AuthorizationPermissionMismatch")

    with pytest.raises(Exception, match="upload failed") as refused:
        retrying(denied, URL, sleep=lambda s: None)
    assert calls == [1] and "PermissionError" in str(refused.value)

    answers = iter(
        [_azure("HttpResponseError", 503, "ServerBusy"), _azure("ServiceResponseTimeoutError"), None]
    )

    def flaky() -> str:
        with store_errors(URL, gcs=False):
            answer = next(answers)
            if answer is not None:
                raise answer
        return "done"

    assert retrying(flaky, URL, sleep=lambda s: None) == "done"
