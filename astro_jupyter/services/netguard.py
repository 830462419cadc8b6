"""Refuse network fetches to addresses a tool must not reach (SSRF guard for download_paper).

A URL the model (or a publisher redirect) hands us could point at the notebook server, a
cloud metadata endpoint or the LAN. Before every request — the first and each redirect —
the host is resolved and *every* address it resolves to is checked with ``ipaddress``:
loopback, private, link-local, reserved, multicast and unspecified addresses are refused
unless ``allow_private_downloads`` is set. (A DNS answer that changes between this check
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


def is_public_address(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not (
        ip.is_loopback
        or ip.is_private
        or ip.is_link_local
        or ip.is_reserved
        or ip.is_multicast
        or ip.is_unspecified
        or not ip.is_global
    )


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


async def check_url(url: str, *, allow_private: bool, allowed_hosts: Iterable[str] = ()) -> None:
    """Raise ``BlockedAddressError`` (or ServiceError for a bad URL) unless ``url`` may be fetched.
    ``allowed_hosts`` names hosts exempt from the address check (matched by name, not address)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ServiceError(f"refusing to fetch {url!r}: only http and https URLs are allowed")
    host = parts.hostname
    if not host:
        raise ServiceError(f"refusing to fetch {url!r}: no host")
    if allow_private or host.lower() in {h.lower() for h in allowed_hosts}:
        return
    port = parts.port or (443 if parts.scheme == "https" else 80)
    for address in await resolve_host(host, port):
        if not is_public_address(address):
            raise BlockedAddressError(
                f"refusing to fetch {url}: {host} resolves to {address}, a loopback/private/link-local/"
                "reserved address (set allow_private_downloads / ASTRO_ALLOW_PRIVATE_DOWNLOADS=1 to permit)"
            )
