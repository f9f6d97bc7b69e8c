"""Serving as kube-scheduler serves: one HTTPS port (certs), delegated authentication
(authn: client certificates, the front proxy's request headers, TokenReview) and
authorization (authz: SubjectAccessReview), both cached briefly and bounded (ttl_cache),
and the explain API's aggregated-API documents (aggregated). scheduler.server wires them
into its aiohttp application."""
