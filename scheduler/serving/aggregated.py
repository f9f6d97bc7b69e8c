"""The explain API as an aggregated API (served as metrics-server serves metrics.k8s.io):
kube-apiserver authenticates and authorizes the user, then forwards the request to us
with the user in the front proxy's headers (authn.py), so
`GET /apis/explain.kas.io/v1alpha1/namespaces/NS/pods/NAME` works from any kubeconfig.

The aggregator reads the discovery documents served here (k8s.io/kube-aggregator@v0.37.2:
the availability controller GETs /apis/<group>/<version> and wants a 2xx; discovery
reads /apis and the group version's APIResourceList)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from scheduler.serving.authz import Attributes

__all__ = [
    "EXPLAIN_API_PATH",
    "GROUP",
    "GROUP_VERSION",
    "RESOURCE",
    "VERSION",
    "discovery_routes",
    "explain_attributes",
]

GROUP = "explain.kas.io"
VERSION = "v1alpha1"
GROUP_VERSION = f"{GROUP}/{VERSION}"
RESOURCE = "pods"
EXPLAIN_API_PATH = f"/apis/{GROUP_VERSION}/namespaces/{{namespace}}/{RESOURCE}/{{name}}"


def explain_attributes(namespace: str, name: str) -> Attributes:
    """What the aggregated path asks of the authorizer: `get` on pods.explain.kas.io."""
    return Attributes(
        verb="get", group=GROUP, version=VERSION, resource=RESOURCE,
        namespace=namespace, name=name,
    )  # fmt: skip


def _group() -> dict[str, Any]:
    version = {"groupVersion": GROUP_VERSION, "version": VERSION}
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": GROUP,
        "versions": [version],
        "preferredVersion": version,
    }


def _resources() -> dict[str, Any]:
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": GROUP_VERSION,
        "resources": [
            {
                "name": RESOURCE,
                "singularName": "pod",
                "namespaced": True,
                "kind": "PodExplanation",
                "verbs": ["get"],
            }
        ],
    }


async def _api_groups(request: web.Request) -> web.Response:
    group = _group()
    del group["kind"], group["apiVersion"]
    return web.json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]})


async def _api_group(request: web.Request) -> web.Response:
    return web.json_response(_group())


async def _api_resources(request: web.Request) -> web.Response:
    return web.json_response(_resources())


def discovery_routes() -> list[tuple[str, Any]]:
    return [
        ("/apis", _api_groups),
        (f"/apis/{GROUP}", _api_group),
        (f"/apis/{GROUP_VERSION}", _api_resources),
    ]
