"""When a failed API call may be sent again: client-go's rule for writes.

client-go (rest/request.go `request`, with_retry.go `IsNextRetry` and `checkWait`, v0.37.2)
sends a request again only when

- the answer was 429 or any 5xx AND carried a Retry-After header of whole seconds
  (`checkWait`, `retryAfterSeconds`); it then waits that long. A 500 or 503 without
  Retry-After is final: the server did not say the request was not applied;
- or, for a GET only, the connection was reset or cut (`isErrRetryableFunc`: "We are not
  automatically retrying "write" operations, as they are not idempotent").

Below that, Go's http.Transport sends a request again on a reused connection only when
nothing of it was written (net/http/transport.go `shouldRetryRequest`,
`nothingWrittenError`). client-go gives up on a connect failure; here a write whose
connection could not be made or taken in time (`TransportError.sent` False) is sent
again as well: nothing reached the server, so it cannot have been applied.

A write that was sent and then timed out, or whose connection broke before the whole
answer, is never sent again: it may have been applied, and a second copy could act on
a world that moved on (another scheduler's lease, a recreated pod). The caller gets the
error and resolves the unknown outcome by re-reading (the informers), as upstream's
callers do.

`idempotent` calls (GETs; an Event create under a fixed name, whose repeat answers
AlreadyExists; a series patch of absolute values) may be sent again after a transport
error, as client-go retries GETs and its event broadcaster re-sends Events on any
transport error (tools/events/event_broadcaster.go `recordEvent`).
"""

from __future__ import annotations

from scheduler.client.errors import ApiError, TransportError

__all__ = ["may_retry"]


def may_retry(error: ApiError, *, idempotent: bool = False) -> bool:
    """May the call that failed with `error` be sent again?"""
    if isinstance(error, TransportError):
        return idempotent or not error.sent
    if error.status == 429 or error.status >= 500:
        return error.retry_after is not None  # the server asked us to come back
    return False
