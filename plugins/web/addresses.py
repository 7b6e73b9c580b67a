"""Which addresses a local fetch may connect to: public ones only.

A page the model asks for could name (or redirect to, or resolve to) this machine, the
local network or a cloud's metadata service, which hands out credentials to whatever
asks from inside. So every host is resolved here, every address it resolves to must be
public, and the connection goes to the address that was checked (no second lookup a
hostile DNS server could answer differently). ``allow_private`` lifts the check.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_HOSTS = frozenset(
    {"metadata.google.internal", "metadata.goog", "metadata", "instance-data", "localhost"}
)
"""Names that are private whatever a resolver says of them."""

_METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(text)
    for text in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack...
        "169.254.170.2",  # AWS ECS task credentials
        "100.100.100.200",  # Alibaba Cloud
        "fd00:ec2::254",  # AWS over IPv6
    )
)

_SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT, RFC 6598
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class BlockedAddress(Exception):
    """A host that is, or resolves to, an address a fetch may not reach."""


def why_private(address: IpAddress) -> str | None:
    """Why ``address`` is not a public one, or None when it is."""
    if address in _METADATA_ADDRESSES:
        return "a cloud metadata address"
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and address in _NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None:
            return why_private(embedded)
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_multicast:
        return "a multicast address"
    if isinstance(address, ipaddress.IPv4Address) and address in _SHARED:
        return "a carrier-grade NAT address"
    if address.is_private or address.is_reserved or not address.is_global:
        return "a private address"
    return None


def literal(host: str) -> IpAddress | None:
    """``host`` as an IP address when it is written as one (``[::1]`` too)."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def check_host_name(host: str) -> None:
    """Refuse what can be refused without a lookup: private literals and names."""
    name = host.rstrip(".").lower()
    if name in METADATA_HOSTS or name.endswith(".localhost") or name.endswith(".internal"):
        raise BlockedAddress(f"{host} is a local name")
    address = literal(host)
    if address is not None and (why := why_private(address)) is not None:
        raise BlockedAddress(f"{host} is {why}")


@dataclass(frozen=True)
class Resolved:
    host: str
    address: IpAddress


async def resolve_public(host: str, port: int, *, allow_private: bool) -> Resolved:
    """The address to connect to for ``host``: every address it resolves to must be
    public (one private answer among public ones is how rebinding attacks hide)."""
    if not allow_private:
        check_host_name(host)
    address = literal(host)
    if address is not None:
        return Resolved(host, address)
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as error:
        raise BlockedAddress(f"cannot resolve {host}: {error}") from None
    addresses: list[IpAddress] = []
    for info in infos:
        found = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if found not in addresses:
            addresses.append(found)
    if not addresses:
        raise BlockedAddress(f"{host} resolves to no address")
    if not allow_private:
        for found in addresses:
            why = why_private(found)
            if why is not None:
                raise BlockedAddress(f"{host} resolves to {found}, {why}")
    return Resolved(host, addresses[0])
