"""scheduler.client.errors: one tree, chosen by HTTP status, translated in one place."""

from __future__ import annotations

import json

import aiohttp
import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from scheduler.client import errors
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
    Unauthorized,
    api_errors,
    error_from_response,
    translate,
)


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
    ("exc", "retryable"),
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
def test_only_throttling_server_and_transport_errors_are_retryable(
    exc: ApiError, retryable: bool
) -> None:
    assert exc.retryable is retryable


def test_an_api_exception_of_kubernetes_asyncio_translates_with_its_body() -> None:
    original = ApiException(status=409, reason="Conflict")
    original.body = status_body(409, "Conflict", "the object has been modified")
    err = translate(original)
    assert isinstance(err, Conflict)
    assert err.message == "the object has been modified"


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
