"""scheduler.client.errors: one tree, chosen by HTTP status, translated in one place."""

from __future__ import annotations

import json

import aiohttp
import pytest
from aiohttp.client_reqrep import ConnectionKey
from kubernetes_asyncio.client.exceptions import ApiException

from scheduler.client import errors
from scheduler.client.error_translation import api_errors, translate
from scheduler.client.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    ConnectionFailed,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    Timeout,
    TooManyRequests,
    TransportError,
    Unauthorized,
    error_from_response,
)
from scheduler.client.retries import may_retry


def status_body(code: int, reason: str, message: str = "m", **details: object) -> bytes:
    body: dict[str, object] = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }
    if details:
        body["details"] = details
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    ("status", "reason", "expected"),
    [
        (401, "Unauthorized", Unauthorized),
        (403, "Forbidden", Forbidden),
        (404, "NotFound", NotFound),
        (409, "Conflict", Conflict),
        (409, "AlreadyExists", AlreadyExists),
        (410, "Expired", Gone),
        (422, "Invalid", Invalid),
        (429, "TooManyRequests", TooManyRequests),
        (500, "InternalError", ServerError),
        (503, "ServiceUnavailable", ServerError),
        (418, "Teapot", ServerError),
    ],
)
def test_a_status_answer_picks_its_class_by_http_status(
    status: int, reason: str, expected: type[ApiError]
) -> None:
    err = error_from_response(status, status_body(status, reason, "why"))
    assert type(err) is expected
    assert (err.status, err.reason, err.message) == (status, reason, "why")


def test_already_exists_is_a_conflict() -> None:
    assert isinstance(error_from_response(409, status_body(409, "AlreadyExists")), Conflict)


def test_retry_after_comes_from_status_details_then_the_header() -> None:
    err = error_from_response(429, status_body(429, "TooManyRequests", retryAfterSeconds=3))
    assert err.retry_after == 3.0
    err = error_from_response(503, b"busy", {"Retry-After": "2"})
    assert err.retry_after == 2.0
    assert err.message == "busy"


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("2", 2.0), (" 7 ", 7.0), ("-1", 0.0), ("1.5", None), ("Wed, 21 Oct 2026 07:28:00 GMT", None)],
)
def test_a_retry_after_header_counts_only_as_whole_seconds(
    value: str, seconds: float | None
) -> None:
    # client-go's retryAfterSeconds: strconv.Atoi, anything else is no Retry-After
    assert error_from_response(503, b"busy", {"Retry-After": value}).retry_after == seconds


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (error_from_response(429, None), True),
        (error_from_response(500, None), True),
        (ConnectionFailed("refused"), True),
        (Timeout("slow"), True),
        (error_from_response(404, None), False),
        (error_from_response(409, None), False),
        (error_from_response(403, None), False),
    ],
)
def test_only_throttling_server_and_transport_errors_are_transient(
    exc: ApiError, transient: bool
) -> None:
    assert exc.transient is transient


@pytest.mark.parametrize(
    ("exc", "write", "read"),
    [
        (error_from_response(429, None, {"Retry-After": "1"}), True, True),
        (error_from_response(503, None, {"Retry-After": "1"}), True, True),
        (error_from_response(500, status_body(500, "InternalError", retryAfterSeconds=2)), True, True),
        (error_from_response(429, None), False, False),
        (error_from_response(500, None), False, False),
        (error_from_response(409, None, {"Retry-After": "1"}), False, False),
        (ConnectionFailed("refused", sent=False), True, True),
        (Timeout("no free connection in time", sent=False), True, True),
        (Timeout("no answer in time"), False, True),
        (ConnectionFailed("closed before the whole answer"), False, True),
    ],
)
def test_may_retry_is_client_gos_rule(exc: ApiError, write: bool, read: bool) -> None:
    assert may_retry(exc) is write
    assert may_retry(exc, idempotent=True) is read


def test_an_api_exception_of_kubernetes_asyncio_translates_with_its_body() -> None:
    original = ApiException(status=409, reason="Conflict")
    original.body = status_body(409, "Conflict", "the object has been modified")
    err = translate(original)
    assert isinstance(err, Conflict)
    assert err.message == "the object has been modified"


@pytest.mark.parametrize(
    ("original", "sent"),
    [
        (aiohttp.ClientConnectorError(ConnectionKey("h", 1, False, False, None, None, None, None),
                                      ConnectionRefusedError(111, "refused")), False),
        (aiohttp.ConnectionTimeoutError("connect"), False),
        (aiohttp.SocketTimeoutError("read"), True),
        (aiohttp.ServerDisconnectedError(), True),
        (TimeoutError(), True),
    ],
)
def test_a_translated_transport_failure_says_whether_the_request_was_sent(
    original: BaseException, sent: bool
) -> None:
    err = translate(original)
    assert isinstance(err, TransportError)
    assert err.sent is sent


@pytest.mark.parametrize(
    ("original", "expected"),
    [
        (aiohttp.ClientConnectionError("refused"), ConnectionFailed),
        (aiohttp.ClientPayloadError("cut"), ConnectionFailed),
        (aiohttp.ServerTimeoutError("read"), Timeout),
        (TimeoutError(), Timeout),
        (ConnectionRefusedError(111, "refused"), ConnectionFailed),
    ],
)
def test_transport_failures_translate_to_status_zero(
    original: BaseException, expected: type[ApiError]
) -> None:
    err = translate(original)
    assert type(err) is expected
    assert err.status == 0
    assert err.code == "<error>"


def test_api_errors_raises_the_translation_from_the_original() -> None:
    original = aiohttp.ClientPayloadError("cut")
    with pytest.raises(ConnectionFailed) as info, api_errors():
        raise original
    assert info.value.__cause__ is original


def test_api_errors_leaves_unrelated_exceptions_alone() -> None:
    with pytest.raises(KeyError), api_errors():
        raise KeyError("x")


def test_translate_refuses_what_is_not_an_api_error() -> None:
    with pytest.raises(TypeError):
        translate(KeyError("x"))


def test_the_tree_is_drawn_in_the_module_docstring() -> None:
    doc = errors.__doc__ or ""
    for name in errors.__all__:
        if name[0].isupper():
            assert name in doc, name
