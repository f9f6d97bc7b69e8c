"""Per-node lists on request, a page at a time, as the Kubernetes list API pages.

A 5000-node cluster makes two 5000-entry lists per answer (the last attempt's and the
dry run's); explain leaves them out unless asked (`nodes=true`) and then pages them by
node name: `limit` names per page, and a `continue` token that the next request hands
back. One page covers both lists: the page's names are the first `limit` names after
the token's start, in the union of the lists' names, and each list shows its entries
for those names.

The token is the apiserver's shape (k8s.io/apiserver@v0.37.2 pkg/storage/continue.go:
base64url without padding of a small JSON object with a version, here the pod's uid in
place of a resourceVersion, and the start key: the last name served). A token that does
not decode, or names another pod, is a 400 "invalid continue token" (as
pkg/storage/interfaces.go answers). The pages are keyed by name, not by position, so a
token stays valid when the dry run's answer was renewed between two pages; each page
carries the time of the evaluation it was cut from.
"""

from __future__ import annotations

import base64
import binascii
import json
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduler.framework.status import Status

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "NodePage",
    "PageError",
    "PageRequest",
    "cut_page",
    "encode_continue",
    "page_request",
]

TOKEN_VERSION = "explain.kas.io/v1alpha1"
DEFAULT_LIMIT = 500
MAX_LIMIT = 5000


class PageError(ValueError):
    """A bad `nodes`, `limit` or `continue` parameter (HTTP 400)."""


@dataclass(frozen=True, slots=True)
class PageRequest:
    limit: int
    start: str  # the last name already served ("": from the first)


@dataclass(frozen=True, slots=True)
class NodePage:
    names: frozenset[str]
    next_token: str  # "" on the last page
    remaining: int  # names after this page


def encode_continue(uid: str, last_name: str) -> str:
    raw = json.dumps({"v": TOKEN_VERSION, "uid": uid, "start": last_name}).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _decode_continue(token: str, uid: str) -> str:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        obj = json.loads(raw)
    except (binascii.Error, ValueError) as exc:
        raise PageError(f"invalid continue token: {exc}") from None
    if not isinstance(obj, dict) or obj.get("v") != TOKEN_VERSION:
        raise PageError("invalid continue token: not an explain token of this version")
    start = obj.get("start")
    if not isinstance(start, str) or not start:
        raise PageError("invalid continue token: empty start key")
    if obj.get("uid") != uid:
        raise PageError("invalid continue token: it pages another pod's answer")
    return start


def page_request(query: Mapping[str, str], uid: str) -> PageRequest | None:
    """The page asked for by the query (None: no per-node lists). `uid` is the pod's,
    checked against the token's."""
    flag = query.get("nodes", "false")
    if flag not in ("true", "false"):
        raise PageError(f"nodes must be true or false, not {flag!r}")
    if flag == "false":
        if "limit" in query or "continue" in query:
            raise PageError("limit and continue page the per-node lists: add nodes=true")
        return None
    text = query.get("limit", "")
    limit = DEFAULT_LIMIT
    if text:
        if not text.isdigit() or not 0 < int(text) <= MAX_LIMIT:
            raise PageError(f"limit must be an integer from 1 to {MAX_LIMIT}, not {text!r}")
        limit = int(text)
    token = query.get("continue", "")
    return PageRequest(limit, _decode_continue(token, uid) if token else "")


def cut_page(
    uid: str, request: PageRequest, lists: Sequence[Mapping[str, Status] | None]
) -> NodePage:
    """The page's names in the union of the lists' node names (sorted)."""
    union = sorted({name for statuses in lists if statuses is not None for name in statuses})
    first = bisect_right(union, request.start) if request.start else 0
    page = union[first : first + request.limit]
    remaining = len(union) - first - len(page)
    token = encode_continue(uid, page[-1]) if remaining and page else ""
    return NodePage(frozenset(page), token, remaining)
