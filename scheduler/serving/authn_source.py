"""Keeping the delegated-authentication configuration current: read ConfigMap
kube-system/extension-apiserver-authentication at start and every `resync` seconds
(upstream's ConfigMap CA controller re-reads it so rotated CAs are picked up), retrying
every `retry` seconds until the first read succeeds. A failed read keeps the last good
configuration and is logged, as kube-scheduler tolerates a failed in-cluster lookup
(TolerateInClusterLookupFailure): tokens still work without it, client certificates do not.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from scheduler.serving.authn_config import (
    CONFIGMAP_NAME,
    CONFIGMAP_NAMESPACE,
    AuthenticationConfig,
    config_from_configmap,
)

__all__ = ["CONFIGMAP_PATH", "keep_authentication_config"]

log = logging.getLogger(__name__)

CONFIGMAP_PATH = f"/api/v1/namespaces/{CONFIGMAP_NAMESPACE}/configmaps/{CONFIGMAP_NAME}"


async def keep_authentication_config(
    get: Callable[[str], Awaitable[dict[str, Any]]],
    apply: Callable[[AuthenticationConfig], None],
    *,
    resync: float = 60.0,
    retry: float = 5.0,
) -> None:
    """Runs until cancelled; never raises."""
    current: AuthenticationConfig | None = None
    while True:
        try:
            config = config_from_configmap(await get(CONFIGMAP_PATH))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning(
                "cannot read %s/%s (client certificates and the front proxy are not "
                "accepted until it is read): %s", CONFIGMAP_NAMESPACE, CONFIGMAP_NAME, exc,
            )  # fmt: skip
            await asyncio.sleep(resync if current is not None else retry)
            continue
        if config != current:
            apply(config)
            current = config
            log.info(
                "delegated authentication configured client_cas=%d requestheader=%s",
                len(config.client_cas), config.request_header is not None,
            )  # fmt: skip
        await asyncio.sleep(resync)
