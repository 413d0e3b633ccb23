"""Which push endpoints the gateway may POST to (docs/remote.md, "Push").

A push subscription is a URL a browser hands the gateway; the gateway then POSTs
to it. Unchecked, anyone who can subscribe could make the gateway call into its
own network (a cloud metadata service at 169.254.169.254, an admin page on
10.0.0.1, the gateway itself on 127.0.0.1). The rule:

- https only, to a host whose every address is public (not loopback, private,
  link-local, multicast, reserved, unspecified, CGNAT 100.64/10, IPv6 ULA or
  link-local, nor an IPv6 form that carries an IPv4 address: mapped, 6to4,
  Teredo, NAT64);
- or an endpoint starting with one of the operator's prefixes
  (`agentmail serve --push-endpoint-allow URL_PREFIX`, settings
  `push_endpoint_allow`): how the tests point at a push service of their own on
  http://127.0.0.1:PORT/.

The rule is checked when a subscription is made AND at every send, because DNS
answers change. At send the check is made by the connection itself
(`GuardedBackend.connect_tcp`): the host is resolved once, every address
checked, and the socket connected to the address that was checked — there is
no second resolution an attacker's DNS could answer differently. TLS still
verifies the certificate against the URL's host name (httpcore passes the
origin's host as SNI and for verification, not the address connected to).
"""

from __future__ import annotations

import functools
import ipaddress
import socket
import ssl
import typing
from urllib.parse import urlsplit

import anyio
import httpcore
import httpx

MAX_ENDPOINT = 2000

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_CGNAT = ipaddress.ip_network("100.64.0.0/10")


class EndpointRefused(Exception):
    """The endpoint breaks the rule; the message says why (shown to the caller)."""


def address_refusal(address: str) -> str | None:
    """Why the gateway must not connect to this address; None if it is public."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return f"{address} is not an IP address"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return f"{ip} is an IPv4-mapped address"
        if ip.sixtofour is not None or ip.teredo is not None:
            return f"{ip} carries an IPv4 address (6to4/Teredo)"
        if ip in _NAT64 or ip in _NAT64_LOCAL:
            return f"{ip} is a NAT64 address"
        if ip.is_site_local:
            return f"{ip} is a site-local address"
    if ip.is_loopback:
        return f"{ip} is a loopback address"
    if ip.is_link_local:
        return f"{ip} is a link-local address"
    if ip.is_multicast:
        return f"{ip} is a multicast address"
    if ip.is_unspecified:
        return f"{ip} is the unspecified address"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
        return f"{ip} is a shared (CGNAT) address"
    if ip.is_reserved:
        return f"{ip} is a reserved address"
    if ip.is_private or not ip.is_global:
        return f"{ip} is a private address"
    return None


def allowed_by_prefix(endpoint: str, prefixes: typing.Iterable[str]) -> bool:
    return any(p and endpoint.startswith(p) for p in prefixes)


def check_shape(endpoint: str, prefixes: typing.Iterable[str]) -> bool:
    """Refuse (EndpointRefused) an endpoint that is not a URL the gateway may use;
    True when an operator's prefix allows it (no address check then)."""
    if len(endpoint) > MAX_ENDPOINT:
        raise EndpointRefused(f"endpoint must be at most {MAX_ENDPOINT} characters")
    if any(c.isspace() or ord(c) < 0x20 for c in endpoint):
        raise EndpointRefused("endpoint must not contain spaces or control characters")
    if allowed_by_prefix(endpoint, prefixes):
        return True
    parts = urlsplit(endpoint)
    if parts.scheme != "https":
        raise EndpointRefused("endpoint must be an https URL")
    if not parts.hostname:
        raise EndpointRefused("endpoint has no host")
    if parts.username is not None or parts.password is not None:
        raise EndpointRefused("endpoint must not carry a user name or password")
    try:
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError as exc:
        raise EndpointRefused(f"endpoint has a bad port: {exc}") from exc
    return False


async def resolve_public(host: str, port: int) -> str:
    """The first address of `host`, once every address it resolves to is public;
    EndpointRefused otherwise (one private address among public ones is refused:
    which one a client would connect to is the resolver's choice)."""
    try:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise EndpointRefused(f"endpoint host {host!r} does not resolve: {exc}") from exc
    addresses = [str(info[4][0]) for info in infos]
    if not addresses:
        raise EndpointRefused(f"endpoint host {host!r} has no address")
    for address in addresses:
        why = address_refusal(address)
        if why is not None:
            raise EndpointRefused(f"endpoint host {host!r} resolves to {why}")
    return addresses[0]


async def check_endpoint(endpoint: str, prefixes: typing.Iterable[str]) -> None:
    """The whole rule, as at subscribe time (EndpointRefused says why)."""
    if check_shape(endpoint, prefixes):
        return
    parts = urlsplit(endpoint)
    assert parts.hostname is not None  # check_shape
    await resolve_public(parts.hostname, parts.port or 443)


class GuardedBackend(httpcore.AnyIOBackend):
    """Connects only to public addresses: resolves the host itself, checks every
    address, and connects to the checked one (no second resolution)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            with anyio.fail_after(timeout):
                address = await resolve_public(host, port)
        except EndpointRefused as exc:
            raise httpcore.ConnectError(f"refused: {exc}") from exc
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"resolving {host!r} timed out") from exc
        return await super().connect_tcp(address, port, timeout, local_address, socket_options)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The one client TLS context of the push senders (httpx's defaults: certifi's
    CAs, verification on). Loading the CA bundle costs about 20 ms of CPU, and
    each httpx client and transport made its own: three on every gateway start."""
    return httpx.create_ssl_context(trust_env=False)


def guarded_transport() -> httpx.AsyncHTTPTransport:
    """An httpx transport whose every connection goes through GuardedBackend.
    trust_env=False: an HTTPS_PROXY from the environment would connect to the
    proxy instead, out of the guard's sight."""
    ssl_context = tls_context()
    transport = httpx.AsyncHTTPTransport(verify=ssl_context, trust_env=False, retries=0)
    # httpx takes no network backend; its pool is replaced by one like it that
    # has ours (the same arguments httpx would pass, with the defaults above).
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=ssl_context,
        max_connections=100,
        max_keepalive_connections=20,
        keepalive_expiry=5.0,
        http1=True,
        http2=False,
        retries=0,
        network_backend=GuardedBackend(),
    )
    return transport
