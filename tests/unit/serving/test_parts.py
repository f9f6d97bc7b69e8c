"""scheduler.serving's parts in memory: the bounded TTL cache, the review limiter, the
front proxy's header rules, client certificate users, the always-allowed path rules, the
ConfigMap, Go durations and the self-signed serving certificate."""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from multidict import CIMultiDict, CIMultiDictProxy

from scheduler.serving.authn_config import ConfigMapError, config_from_configmap
from scheduler.serving.authz import Attributes, Authorizer, PathMatcher
from scheduler.serving.certs import CertError, serving_cert
from scheduler.serving.flags import parse_duration, parse_paths
from scheduler.serving.identity import (
    RequestHeaderNames,
    UserInfo,
    header_user,
    unescape_extra_key,
    with_authenticated_group,
)
from scheduler.serving.reviews import ReviewBusy, Reviewer
from scheduler.serving.ttl_cache import TTLCache


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_ttl_cache_expires_entries_at_their_ttl() -> None:
    clock = Clock()
    cache: TTLCache[str, int] = TTLCache(10, clock=clock)
    cache.set("a", 1, 10.0)
    cache.set("b", 2, 5.0)
    clock.now = 4.9
    assert (cache.get("a"), cache.get("b")) == (1, 2)
    clock.now = 5.0
    assert cache.get("b") is None and cache.get("a") == 1
    clock.now = 10.0
    assert cache.get("a") is None and len(cache) == 0


def test_ttl_cache_is_bounded_and_forgets_the_least_recently_used() -> None:
    cache: TTLCache[int, int] = TTLCache(3, clock=Clock())
    for i in range(3):
        cache.set(i, i, 60)
    cache.get(0)  # 0 is now the most recent: 1 goes first
    cache.set(3, 3, 60)
    assert cache.get(1) is None and cache.get(0) == 0 and len(cache) == 3
    for i in range(10_000):
        cache.set(100 + i, i, 60)
    assert len(cache) == 3


def test_a_zero_ttl_keeps_nothing() -> None:
    cache: TTLCache[str, int] = TTLCache(3)
    cache.set("a", 1, 0)
    assert cache.get("a") is None


async def test_the_authorizer_caches_allowed_and_denied_for_their_own_ttls() -> None:
    posts: list[dict[str, Any]] = []

    async def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        posts.append(body)
        return {"status": {"allowed": body["spec"]["user"] == "yes"}}

    clock = Clock()
    authz = Authorizer(Reviewer(post), allow_ttl=10, deny_ttl=2, clock=clock)
    attrs = Attributes(verb="get", path="/metrics")
    yes, no = UserInfo("yes"), UserInfo("no")
    assert (await authz.authorize(yes, attrs)).allowed
    assert not (await authz.authorize(no, attrs)).allowed
    clock.now = 3  # the denial expired, the allow did not
    await authz.authorize(yes, attrs)
    await authz.authorize(no, attrs)
    assert [p["spec"]["user"] for p in posts] == ["yes", "no", "no"]
    # the always-allowed paths and system:masters need no review
    assert (await authz.authorize(no, Attributes(verb="get", path="/livez"))).allowed
    assert (await authz.authorize(UserInfo("m", groups=("system:masters",)), attrs)).allowed
    assert len(posts) == 3


async def test_identical_reviews_share_one_post_and_a_full_queue_refuses() -> None:
    gate = asyncio.Event()
    posts = 0

    async def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        nonlocal posts
        posts += 1
        await gate.wait()
        return {"status": {"allowed": True}}

    reviewer = Reviewer(post, max_concurrent=1, max_waiting=2)
    same = [asyncio.create_task(reviewer.review("k", "/p", {})) for _ in range(5)]
    await asyncio.sleep(0)
    # one POST in flight holds the only slot; two distinct reviews wait; a third is refused
    waiting = [asyncio.create_task(reviewer.review(f"w{i}", "/p", {})) for i in range(2)]
    await asyncio.sleep(0)
    with pytest.raises(ReviewBusy):
        await reviewer.review("w3", "/p", {})
    gate.set()
    answers = await asyncio.gather(*same, *waiting)
    assert all(a == {"allowed": True} for a in answers)
    assert posts == 3


def _headers(pairs: list[tuple[str, str]]) -> CIMultiDictProxy[str]:
    return CIMultiDictProxy(CIMultiDict(pairs))


def test_front_proxy_headers_as_upstream_reads_them() -> None:
    names = RequestHeaderNames(
        username=("X-Remote-User", "X-Other-User"), uid=("X-Remote-Uid",),
        group=("X-Remote-Group",), extra_prefixes=("X-Remote-Extra-", "X-Other-Extra-"),
    )  # fmt: skip
    user = header_user(_headers([
        ("x-remote-user", ""), ("X-Other-User", "bob"), ("X-Remote-Uid", "42"),
        ("X-Remote-Group", "a"), ("X-Remote-Group", ""), ("x-remote-group", "b"),
        ("X-Remote-Extra-Scopes", "s1"), ("X-Remote-Extra-scopes", "s2"),
        ("X-Other-Extra-Scopes", "s3"), ("X-Remote-Extra-Key%2FWith%zzBad", "v"),
        ("X-Remote-Extra-acme.com%2Fproject", "p"),
    ]), names)  # fmt: skip
    assert user is not None
    assert (user.name, user.uid, user.groups) == ("bob", "42", ("a", "b"))
    assert user.extra["scopes"] == ("s1", "s2", "s3")  # prefix order, then header order
    assert user.extra["key%2fwith%zzbad"] == ("v",)  # malformed escape: kept as is
    assert user.extra["acme.com/project"] == ("p",)
    assert header_user(_headers([("X-Remote-Group", "a")]), names) is None


def test_extra_key_unescaping() -> None:
    assert unescape_extra_key("a%2fb") == "a/b"
    assert unescape_extra_key("a%2") == "a%2"
    assert unescape_extra_key("plain") == "plain"


def test_the_authenticated_group_is_added_once() -> None:
    assert with_authenticated_group(UserInfo("u", groups=("g",))).groups == (
        "g", "system:authenticated",
    )  # fmt: skip
    already = UserInfo("u", groups=("system:authenticated",))
    assert with_authenticated_group(already).groups == ("system:authenticated",)


def test_always_allowed_path_rules() -> None:
    m = PathMatcher(["/healthz", "/debug/*", "/"])
    assert m.matches("/healthz") and m.matches("/debug/pprof") and m.matches("/")
    assert not m.matches("/healthz/ping") and not m.matches("/metrics")
    with pytest.raises(ValueError, match="only trailing"):
        PathMatcher(["/a*b"])
    assert parse_paths("/healthz, /readyz,,/livez") == ("/healthz", "/readyz", "/livez")


def test_go_durations() -> None:
    assert parse_duration("10s") == 10
    assert parse_duration("1m30s") == 90
    assert parse_duration("250ms") == pytest.approx(0.25)
    assert parse_duration("0") == 0
    for bad in ("10", "ten", "-1s", "", "1x"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_configmap_lists_must_be_json_string_lists() -> None:
    with pytest.raises(ConfigMapError, match="requestheader-allowed-names"):
        config_from_configmap({"data": {
            "requestheader-client-ca-file": _self_signed_ca_pem(),
            "requestheader-allowed-names": "front-proxy-client",
        }})  # fmt: skip
    assert config_from_configmap({"data": {}}).request_header is None


def _self_signed_ca_pem() -> str:
    from scheduler.serving.certs import generate_self_signed

    cert_pem, _ = generate_self_signed("localhost", [], [])
    return (
        cert_pem.decode().split("-----END CERTIFICATE-----")[1].strip()
        + "\n-----END CERTIFICATE-----\n"
    )


def test_self_signed_cert_as_upstream_generates_it(tmp_path: Path) -> None:
    cert = serving_cert(cert_file="", key_file="", cert_dir=str(tmp_path / "c"),
                        bind_address="0.0.0.0")  # fmt: skip
    assert cert.generated
    leaf, ca = x509.load_pem_x509_certificates(cert.cert_pem)
    leaf.verify_directly_issued_by(ca)
    assert ca.subject.rfc4514_string().startswith("CN=localhost-ca@")
    assert leaf.subject.rfc4514_string().startswith("CN=localhost@")
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost", "localhost"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    # a second start reuses the pair in --cert-dir
    again = serving_cert(cert_file="", key_file="", cert_dir=str(tmp_path / "c"),
                         bind_address="0.0.0.0")  # fmt: skip
    assert not again.generated and again.cert_pem == cert.cert_pem
    assert oct((tmp_path / "c" / "kube-async-scheduler.key").stat().st_mode & 0o777) == "0o600"
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    cert.load_into(ctx)


def test_a_bind_address_is_a_name_of_the_generated_cert() -> None:
    cert = serving_cert(cert_file="", key_file="", cert_dir="", bind_address="10.1.2.3")
    assert cert.cert_file is None
    leaf = x509.load_pem_x509_certificates(cert.cert_pem)[0]
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("10.1.2.3") in san.get_values_for_type(x509.IPAddress)


def test_mounted_cert_flags_are_checked(tmp_path: Path) -> None:
    with pytest.raises(CertError, match="together"):
        serving_cert(cert_file="a.crt", key_file="", cert_dir="", bind_address="0.0.0.0")
    with pytest.raises(CertError, match="cannot read"):
        serving_cert(cert_file=str(tmp_path / "no.crt"), key_file=str(tmp_path / "no.key"),
                     cert_dir="", bind_address="0.0.0.0")  # fmt: skip
    (tmp_path / "bad.crt").write_text("not a cert")
    (tmp_path / "bad.key").write_text("not a key")
    with pytest.raises(CertError, match="unusable"):
        serving_cert(cert_file=str(tmp_path / "bad.crt"), key_file=str(tmp_path / "bad.key"),
                     cert_dir="", bind_address="0.0.0.0")  # fmt: skip


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--client-ca-file", "/nonexistent/ca.crt"], "--client-ca-file"),
        (["--authentication-token-webhook-cache-ttl", "ten"],
         "--authentication-token-webhook-cache-ttl"),
        (["--authorization-always-allow-paths", "/a*b"], "--authorization-always-allow-paths"),
        (["--secure-port", "70000"], "--secure-port"),
    ],
)  # fmt: skip
def test_bad_serving_flags_exit_2_with_one_line_naming_the_flag(
    args: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from scheduler.cli import main

    assert main(["run", "--kubeconfig", "/nonexistent/kubeconfig", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and flag in err, err


def test_a_half_given_serving_pair_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    from scheduler.cli import main

    assert main(["run", "--tls-cert-file", "/x.crt"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--tls-private-key-file" in err


def test_the_plain_http_port_flag_is_gone() -> None:
    from scheduler.cli import build_parser

    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["run", "--port", "10251"])
    assert exc.value.code == 2


async def test_the_configmap_is_retried_until_read_and_applied_once_per_change() -> None:
    from scheduler.serving.authn_config import AuthenticationConfig
    from scheduler.serving.authn_source import CONFIGMAP_PATH, keep_authentication_config

    answers: list[Any] = [ConnectionError("down"), {"data": {}}, {"data": {}}]
    asked: list[str] = []
    applied: list[AuthenticationConfig] = []
    done = asyncio.Event()

    async def get(path: str) -> dict[str, Any]:
        asked.append(path)
        answer = answers.pop(0) if answers else {"data": {}}
        if isinstance(answer, Exception):
            raise answer
        if not answers:
            done.set()
        return dict(answer)

    task = asyncio.create_task(
        keep_authentication_config(get, applied.append, resync=0.001, retry=0.001)
    )
    await asyncio.wait_for(done.wait(), 30)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert asked[0] == CONFIGMAP_PATH and len(asked) >= 3
    assert len(applied) == 1 and applied[0].request_header is None  # unchanged: once
