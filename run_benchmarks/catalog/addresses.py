"""What a host's address may be, checked where a cluster file or ``--hosts`` names one (before anything runs).

An address goes to SSH and to every launcher as the rendezvous address (``--master_addr``), so it must name
one machine: a host name, or an IP address that is one. Refused: anything that is neither (``-oProxy...``,
spaces), a dotted number that is no IPv4 address (``999.999.999.999``: names resolve, so it would otherwise
wait on DNS and fail late), and addresses no single host has: the unspecified address (``0.0.0.0``, ``::``,
which means "any interface" to a listener), multicast and the IPv4 broadcast address.
"""
from __future__ import annotations

import ipaddress
import re
import socket
from typing import Optional

ADDRESS = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9.\-]{0,252}|[0-9A-Fa-f:]{2,39})$")
_DOTTED = re.compile(r"^[0-9.]+$")


def address_problem(address: str) -> Optional[str]:
    """Why ``address`` names no host, or None when it may."""
    if not ADDRESS.match(address):
        return "not a host name or IP address"
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        if _DOTTED.match(address):
            return "not an IPv4 address (four numbers from 0 to 255, dot-separated)"
        return None  # a host name
    if ip.is_unspecified:
        return "the unspecified address (any interface, to a listener), which no host has"
    if ip.is_multicast:
        return "a multicast address, which no single host has"
    if ip == ipaddress.IPv4Address("255.255.255.255"):
        return "the broadcast address, which no single host has"
    return None


def checked_address(address: str) -> str:
    """``address`` when it may name a host; a ValueError (a schema's refusal) saying why when not."""
    problem = address_problem(address)
    if problem:
        raise ValueError(f"address {address[:100]!r} is {problem}; give a host name or the host's IP address")
    return address


def is_this_machine(address: str) -> bool:
    """Whether ``address`` is one of this machine's own (a socket can bind to it)."""
    try:
        found = socket.getaddrinfo(address, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return False
    for family, kind, _, _, where in found:
        with socket.socket(family, kind) as probe:
            try:
                probe.bind((where[0], 0))
                return True
            except OSError:
                continue
    return False
