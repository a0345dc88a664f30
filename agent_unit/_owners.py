"""Who holds a lease: a process identity that a restarted server can check against the OS.

A lease names its owner so that a server which restarts after a crash (``kill -9``, an
out-of-memory kill, a power cut) can recognise the runs its dead predecessor held and recover
them at once, instead of waiting for their leases to lapse. An owner is
``host:pid:namespace:start:nonce``: the host name, the process id, the process-id namespace
(so a pid is only compared where it means the same process: two containers may share a host
name and both be pid 1), the process's start time (so a pid the OS has given to another
process since is not mistaken for the dead one) and a random nonce.

:func:`owner_is_gone` answers True only when the OS proves the owner ended: the same host and
pid namespace, and no process with that pid, or one that started at another time. Anything it
cannot prove (another machine, another container, a platform without ``/proc``) is False, and
the lease is left to lapse, as before.
"""

from __future__ import annotations

import os
import socket
from functools import cache

from ._ids import new_id

__all__ = ["owner_is_gone", "process_owner"]


def process_owner(kind: str = "x") -> str:
    """A new owner id for this process: ``host:pid:namespace:start:nonce`` (``kind`` marks the nonce)."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_namespace()}:{_started(pid)}:{new_id(kind)[-8:]}"


def owner_is_gone(owner: str) -> bool:
    """Whether the process that ``owner`` names has certainly ended (see the module's docstring).

    ``owner`` may be a lease token (``owner/claim``). Owners of another form (set by hand, or by
    an earlier version) are never taken for gone.
    """
    parts = owner.split("/", 1)[0].split(":")
    if len(parts) != 5:
        return False
    host, pid_text, namespace, started, _ = parts
    if host != socket.gethostname() or not namespace or namespace != _namespace() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return started != _started(pid)  # this pid is ours now: the owner was an earlier process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists, owned by another user
        pass
    return bool(started) and _started(pid) not in ("", started)  # the pid was given to another process


@cache
def _namespace() -> str:
    """This process's pid namespace (Linux), or "" where the OS does not say (then nothing is proven)."""
    try:
        link = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return ""
    return "".join(ch for ch in link if ch.isdigit())


def _started(pid: int) -> str:
    """When process ``pid`` started, in clock ticks since boot (Linux), or "" where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read().decode(errors="replace")
    except OSError:
        return ""
    fields = text.rsplit(")", 1)[-1].split()  # the command name, in parentheses, may hold spaces
    return fields[19] if len(fields) > 19 else ""  # field 22 of the line; 20th after the name
