"""SSRF guard: IPv6 transition forms are judged on the IPv4 address they embed.

A 6to4 address ``2002:7f00:1::`` (127.0.0.1 inside), NAT64 ``64:ff9b::a9fe:a9fe`` (the
cloud metadata address), a Teredo address, SIIT ``::ffff:0:a.b.c.d`` and the deprecated
IPv4-compatible ``::a.b.c.d`` all deliver to the embedded IPv4 host; before the fix the
6to4 and SIIT forms of private addresses passed the guard as "global IPv6".
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from astro_jupyter.services.download import DownloadFailed
from astro_jupyter.services.netguard import BlockedAddressError, check_url, embedded_ipv4, is_public_address
from tests.fakes.base import FakeServer
from tests.fakes.file_server import Route
from tests.fakes.library_env import make_paper_config, started


def sixtofour(v4: str) -> str:
    return str(ipaddress.IPv6Address((0x2002 << 112) | (int(ipaddress.IPv4Address(v4)) << 80)))


def nat64(v4: str, prefix: str = "64:ff9b::") -> str:
    return str(ipaddress.IPv6Address(int(ipaddress.IPv6Address(prefix)) | int(ipaddress.IPv4Address(v4))))


def teredo(server: str, client: str) -> str:
    obscured = int(ipaddress.IPv4Address(client)) ^ 0xFFFFFFFF
    value = (0x20010000 << 96) | (int(ipaddress.IPv4Address(server)) << 64) | (0x8000 << 48) | (0x1234 << 32) | obscured
    return str(ipaddress.IPv6Address(value))


PRIVATE_V4 = ["127.0.0.1", "10.0.0.5", "192.168.1.1", "172.16.0.9", "169.254.169.254", "100.64.0.1", "0.0.0.0"]
PUBLIC_V4 = "93.184.216.34"

PRIVATE_FORMS = (
    [sixtofour(a) for a in PRIVATE_V4]
    + [nat64(a) for a in PRIVATE_V4]
    + [nat64(a, "64:ff9b:1::") for a in PRIVATE_V4]
    + [teredo(PUBLIC_V4, a) for a in PRIVATE_V4]  # private client behind a public server
    + [teredo(a, PUBLIC_V4) for a in PRIVATE_V4]  # private server
    + ["::ffff:" + a for a in PRIVATE_V4]  # IPv4-mapped
    + ["::ffff:0:" + a for a in PRIVATE_V4]  # SIIT IPv4-translated
    + ["::" + a for a in PRIVATE_V4 if a != "0.0.0.0"]  # IPv4-compatible
)


@pytest.mark.parametrize("address", PRIVATE_FORMS)
def test_transition_forms_of_private_addresses_are_refused(address: str) -> None:
    assert is_public_address(address) is False


@pytest.mark.parametrize(
    "address",
    [sixtofour(PUBLIC_V4), nat64(PUBLIC_V4), teredo(PUBLIC_V4, "8.8.8.8"), "::ffff:" + PUBLIC_V4],
)
def test_transition_forms_of_public_addresses_are_judged_on_the_embedded_address(address: str) -> None:
    assert embedded_ipv4(ipaddress.IPv6Address(address))
    assert is_public_address(address) is True


@pytest.mark.parametrize("address", ["::1", "::", "fe80::1%eth0", "fd00::1", "ff02::1"])
def test_plain_ipv6_special_addresses_stay_refused(address: str) -> None:
    assert is_public_address(address) is False


def test_embedded_addresses_are_extracted() -> None:
    assert embedded_ipv4(ipaddress.IPv6Address("2002:7f00:1::")) == [ipaddress.IPv4Address("127.0.0.1")]
    assert embedded_ipv4(ipaddress.IPv6Address("64:ff9b::a9fe:a9fe")) == [ipaddress.IPv4Address("169.254.169.254")]
    assert embedded_ipv4(ipaddress.IPv6Address("2606:4700:4700::1111")) == []


@pytest.mark.asyncio
@pytest.mark.parametrize("address", ["2002:7f00:1::", "64:ff9b::7f00:1", "::ffff:0:7f00:1", "2002:a9fe:a9fe::"])
async def test_check_url_refuses_ipv6_literals_embedding_private_ipv4(address: str) -> None:
    with pytest.raises(BlockedAddressError, match="resolves to"):
        await check_url(f"http://[{address}]:8888/api/contents", allow_private=False)


@pytest.mark.asyncio
async def test_a_redirect_to_a_6to4_loopback_is_stopped_before_any_connection(
    astro_home: Path, ads_fake: FakeServer, arxiv_fake: FakeServer, file_fake: FakeServer
) -> None:
    """A publisher (here: the loopback fake, explicitly allowed) redirects to the notebook server
    spelled as 6to4; the download must fail with the guard's message, not a connect attempt."""
    target = f"http://[{sixtofour('127.0.0.1')}]:{file_fake.port}/real.pdf"
    file_fake.state["routes"]["/pdf/2301.01234"] = Route(status=302, location=target)
    config = make_paper_config(
        astro_home, ads_fake, arxiv_fake, file_fake, download_allowed_hosts=["127.0.0.1"]
    )
    async with started(config) as services:
        with pytest.raises(DownloadFailed) as info:
            await services.downloads.download("2301.01234")
    attempt = info.value.attempts[0]
    assert attempt.channel == "arxiv"
    assert "2002:7f00:1:: resolves to 2002:7f00:1::" in attempt.error and "loopback/private" in attempt.error
