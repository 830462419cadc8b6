"""Refuse network fetches to addresses a tool must not reach (SSRF guard for download_paper).

A URL the model (or a publisher redirect) hands us could point at the notebook server, a
cloud metadata endpoint or the LAN. Before every request — the first and each redirect —
the host is resolved and *every* address it resolves to is checked with ``ipaddress``:
loopback, private, link-local, reserved, multicast and unspecified addresses are refused
unless the host is listed in ``download_allowed_hosts``. IPv6 transition forms (IPv4-mapped/-compatible,
SIIT, 6to4, NAT64, Teredo) are judged on the IPv4 address they embed. (A DNS answer that changes between this check
and the connect is not covered; the check still stops every plain private-address target.)
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Iterable
from urllib.parse import urlsplit

from ..errors import ServiceError


class BlockedAddressError(ServiceError):
    """The target resolves to an address outside the public internet."""

    reason = "blocked_address"


_NAT64_PREFIXES = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_V4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated IPv4-compatible ::a.b.c.d
_V4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # SIIT ::ffff:0:a.b.c.d


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 transition form carries (empty for a plain IPv6 address).

    A packet to 6to4 ``2002:7f00:1::``, NAT64 ``64:ff9b::7f00:1``, a Teredo address or
    ``::ffff:127.0.0.1`` ends up at the embedded IPv4 address, so that is what must be judged.
    """
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.ipv4_mapped is not None:
        return [ip.ipv4_mapped]
    if ip.sixtofour is not None:
        return [ip.sixtofour]
    if ip.teredo is not None:
        return list(ip.teredo)  # (server, client): traffic reaches both
    if any(ip in net for net in _NAT64_PREFIXES) or ip in _V4_TRANSLATED:
        return [low32]
    if ip in _V4_COMPATIBLE and int(ip) > 1:  # not :: or ::1, which are judged as IPv6
        return [low32]
    return []


def _is_public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return not (
        ip.is_loopback
        or ip.is_private
        or ip.is_link_local
        or ip.is_reserved
        or ip.is_multicast
        or ip.is_unspecified
        or not ip.is_global
    )


def is_public_address(address: str) -> bool:
    """Public internet only; IPv6 forms that embed an IPv4 address are judged on that address."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = embedded_ipv4(ip)
        if embedded:
            return all(_is_public(v4) for v4 in embedded)
    return _is_public(ip)


async def resolve_host(host: str, port: int) -> list[str]:
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ServiceError(f"cannot resolve host {host!r}: {exc}") from exc
    return sorted({str(info[4][0]) for info in infos})


def _target(url: str, *, allow_private: bool, allowed_hosts: Iterable[str]) -> tuple[str, int] | None:
    """The (host, port) whose addresses must be checked, or None when the URL is exempt."""
    shown = url if len(url) <= 300 else url[:300] + "…"
    try:  # a port like "5:80" or a bad IPv6 literal is a ValueError here: a bad URL, not a crash
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise ServiceError(f"refusing to fetch {shown!r}: not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise ServiceError(f"refusing to fetch {shown!r}: only http and https URLs are allowed")
    if not host:
        raise ServiceError(f"refusing to fetch {shown!r}: no host")
    if allow_private or host.lower() in {h.lower() for h in allowed_hosts}:
        return None
    return host, port or (443 if parts.scheme == "https" else 80)


def _judge(url: str, host: str, addresses: list[str]) -> None:
    for address in addresses:
        if not is_public_address(address):
            raise BlockedAddressError(
                f"refusing to fetch {url}: {host} resolves to {address}, a loopback/private/link-local/"
                "reserved address (list the host in download_allowed_hosts / ASTRO_DOWNLOAD_ALLOWED_HOSTS to permit it)"
            )


async def check_url(url: str, *, allow_private: bool, allowed_hosts: Iterable[str] = ()) -> None:
    """Raise ``BlockedAddressError`` (or ServiceError for a bad URL) unless ``url`` may be fetched.
    ``allowed_hosts`` names hosts exempt from the address check (matched by name, not address)."""
    target = _target(url, allow_private=allow_private, allowed_hosts=allowed_hosts)
    if target is not None:
        _judge(url, target[0], await resolve_host(*target))


def check_url_blocking(url: str, *, allow_private: bool, allowed_hosts: Iterable[str] = ()) -> None:
    """``check_url`` for blocking clients (pyvo's ``requests`` session, run in a worker thread)."""
    target = _target(url, allow_private=allow_private, allowed_hosts=allowed_hosts)
    if target is None:
        return
    host, port = target
    try:
        addresses = [str(ipaddress.ip_address(host))]
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise ServiceError(f"cannot resolve host {host!r}: {exc}") from exc
        addresses = sorted({str(info[4][0]) for info in infos})
    _judge(url, host, addresses)
