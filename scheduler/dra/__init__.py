"""Dynamic resource allocation (resource.k8s.io/v1): device selectors in CEL, and (to come)
the structured allocator kube-scheduler's DynamicResources plugin runs per node.

Upstream: k8s.io/dynamic-resource-allocation@v0.37.2 (cel/, structured/). docs/plans/dra.md
says what is here and what is not yet.
"""
