"""Network namespaces and veth pairs for the partition tests (issue #31), with Debian's iproute2
(`ip netns`, `ip link ... type veth`), as root.

`NetLab` creates namespaces and veth links between them (or the test's own namespace, `None`),
runs processes inside a namespace (`ip netns exec NS cmd`: `ip` execs the command, so the pid is
the command's), cuts a link (`ip link set dev X down`) and heals it. Every name carries the run's
pid (`rlt<pid>-…` namespaces, `rt<pid>x<n>` interfaces), everything is torn down in `close()`
(call it in `finally`, or use `with NetLab() as lab`), and `cleanup_leftovers()` removes what a
run that no longer exists left behind (only names of this prefix whose pid is dead).

Addresses: every link is a /30 of 127.<octet>.<link>.0/24, `<octet>` taken from the pid — loopback
addresses, which the kernel routes over a veth once `net.ipv4.conf.<dev>.route_localnet=1` is
set on both ends (and `all` inside the lab's namespaces; the test's own namespace only gets the
per-device setting, on its own devices, gone with them). `NetLab` checks this on its first link
with a real TCP connection; if the kernel refused it, it would fall back to 169.254.<octet>.<n>
link-local addresses, which never leave this machine either (`lab.addressing` says which). On
this machine's kernel (6.x) the 127.0.0.0/8 addressing works.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import threading
from dataclasses import dataclass

NS_PREFIX = "rlt"
DEV_PREFIX = "rt"
IP = shutil.which("ip") or "/usr/sbin/ip"


class NetnsUnavailable(RuntimeError):
    pass


def ip(*args: str, ns: str | None = None, check: bool = True, timeout: float = 15) -> subprocess.CompletedProcess:
    argv = [IP, *args] if ns is None else [IP, "-n", ns, *args]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and out.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv)}` failed ({out.returncode}): {out.stderr.strip() or out.stdout.strip()}")
    return out


def sysctl(key: str, value: str, ns: str | None = None) -> None:
    argv = ["sysctl", "-q", "-w", f"{key}={value}"]
    if ns is None:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=15)
    else:
        out = subprocess.run([IP, "netns", "exec", ns, *argv], capture_output=True, text=True, timeout=15)
    if out.returncode != 0:
        raise RuntimeError(f"sysctl {key}={value} in {ns or 'the test namespace'} failed: {out.stderr.strip()}")


def require_netns() -> None:
    """Raises `NetnsUnavailable` with the reason when this machine cannot create namespaces."""
    if not os.path.exists(IP):
        raise NetnsUnavailable("`ip` (iproute2) is not installed: apt-get install iproute2")
    if os.geteuid() != 0:
        raise NetnsUnavailable(f"network namespaces need root (running as uid {os.geteuid()})")
    name = f"{NS_PREFIX}{os.getpid()}-probe"
    out = ip("netns", "add", name, check=False)
    if out.returncode != 0:
        raise NetnsUnavailable(f"`ip netns add` failed: {out.stderr.strip()}")
    ip("netns", "del", name, check=False)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cleanup_leftovers() -> list[str]:
    """Deletes namespaces and root interfaces of this prefix whose run (pid) is gone."""
    removed = []
    out = ip("netns", "list", check=False).stdout
    for line in out.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.match(rf"^{NS_PREFIX}(\d+)-", name)
        if m and not _pid_alive(int(m.group(1))):
            _kill_namespace_processes(name)
            ip("netns", "del", name, check=False)
            removed.append(name)
    out = ip("-o", "link", "show", check=False).stdout
    for line in out.splitlines():
        m = re.match(rf"^\d+:\s+({DEV_PREFIX}(\d+)x\d+[ab])[@:]", line)
        if m and not _pid_alive(int(m.group(2))):
            ip("link", "del", m.group(1), check=False)
            removed.append(m.group(1))
    return removed


def _kill_namespace_processes(ns: str) -> None:
    """SIGKILLs the processes still running inside a leftover namespace of ours, by pid."""
    out = ip("netns", "pids", ns, check=False).stdout
    for pid in out.split():
        try:
            os.kill(int(pid), 9)
        except (ProcessLookupError, ValueError):
            pass


@dataclass
class Link:
    name: str
    ns_a: str | None  # None: the test's own namespace
    ns_b: str | None
    dev_a: str
    dev_b: str
    addr_a: str
    addr_b: str
    prefix: int = 30

    def ns_of(self, side: str) -> str | None:
        return self.ns_a if side == "a" else self.ns_b


class NetLab:
    """Namespaces and links of one test; `close()` removes everything it created."""

    def __init__(self):
        self.pid = os.getpid()
        self.octet = 64 + self.pid % 128
        self.namespaces: list[str] = []
        self.links: list[Link] = []
        self.procs: list[subprocess.Popen] = []
        self.addressing: str | None = None  # "127/8 + route_localnet" or "169.254/16"
        self._lock = threading.Lock()

    # ---- namespaces and links

    def namespace(self, short: str) -> str:
        name = f"{NS_PREFIX}{self.pid}-{short}"
        ip("netns", "add", name)
        self.namespaces.append(name)
        ip("link", "set", "lo", "up", ns=name)
        sysctl("net.ipv4.conf.all.route_localnet", "1", ns=name)
        return name

    def _addresses(self, index: int) -> tuple[str, str]:
        if self.addressing == "169.254/16":
            base = index * 4
            return f"169.254.{self.octet}.{base + 1}", f"169.254.{self.octet}.{base + 2}"
        return f"127.{self.octet}.{index}.1", f"127.{self.octet}.{index}.2"

    def link(self, name: str, ns_a: str | None, ns_b: str | None) -> Link:
        """A veth pair between `ns_a` and `ns_b` (None: the test's namespace), addressed and up."""
        index = len(self.links) + 1
        dev_a, dev_b = f"{DEV_PREFIX}{self.pid}x{index}a", f"{DEV_PREFIX}{self.pid}x{index}b"
        assert len(dev_a) <= 15, dev_a
        args = ["link", "add", dev_a]
        if ns_a is not None:
            args += ["netns", ns_a]
        args += ["type", "veth", "peer", "name", dev_b]
        if ns_b is not None:
            args += ["netns", ns_b]
        ip(*args)
        if self.addressing is None:
            self.addressing = "127/8 + route_localnet"
        addr_a, addr_b = self._addresses(index)
        link = Link(name, ns_a, ns_b, dev_a, dev_b, addr_a, addr_b)
        self.links.append(link)
        self._configure(link)
        if len(self.links) == 1 and self.addressing.startswith("127") and not self._reachable(link):
            # The kernel does not route 127/8 over a veth: link-local addresses instead.
            self.addressing = "169.254/16"
            for dev, ns, addr in ((dev_a, ns_a, addr_a), (dev_b, ns_b, addr_b)):
                ip("addr", "del", f"{addr}/30", "dev", dev, ns=ns, check=False)
            link.addr_a, link.addr_b = self._addresses(index)
            self._configure(link)
            if not self._reachable(link):
                raise NetnsUnavailable(f"no TCP across a veth pair, with 127/8 or 169.254/16 addresses ({link})")
        return link

    def _configure(self, link: Link) -> None:
        for dev, ns, addr in ((link.dev_a, link.ns_a, link.addr_a), (link.dev_b, link.ns_b, link.addr_b)):
            if addr.startswith("127."):
                sysctl(f"net.ipv4.conf.{dev}.route_localnet", "1", ns=ns)
            ip("addr", "add", f"{addr}/{link.prefix}", "dev", dev, ns=ns)
            ip("link", "set", "dev", dev, "up", ns=ns)

    def _reachable(self, link: Link) -> bool:
        """A real TCP connection from side b to a listener on side a."""
        with socket.socket() as probe:
            if link.ns_a is not None:
                return True  # only the first link is probed, and it starts in the test's namespace
            probe.bind((link.addr_a, 0))
            probe.listen(1)
            port = probe.getsockname()[1]
            code = f"import socket; socket.create_connection(('{link.addr_a}', {port}), timeout=3).close()"
            out = subprocess.run([IP, "netns", "exec", link.ns_b, "python3", "-c", code],
                                 capture_output=True, text=True, timeout=15)
            return out.returncode == 0

    def cut(self, link: Link, side: str = "a") -> None:
        """`ip link set dev X down` on one end: the pair loses its carrier, packets go nowhere,
        TCP connections stay open on both sides (no RST, no FIN)."""
        ip("link", "set", "dev", link.dev_a if side == "a" else link.dev_b, "down", ns=link.ns_of(side))

    def heal(self, link: Link, side: str = "a") -> None:
        ip("link", "set", "dev", link.dev_a if side == "a" else link.dev_b, "up", ns=link.ns_of(side))

    def is_up(self, link: Link, side: str = "a") -> bool:
        out = ip("-o", "link", "show", "dev", link.dev_a if side == "a" else link.dev_b, ns=link.ns_of(side)).stdout
        return ",UP" in out or "<UP" in out

    # ---- processes

    def popen(self, ns: str | None, argv: list[str], **kwargs) -> subprocess.Popen:
        """Starts `argv` inside `ns` (`ip netns exec` execs it: the pid is the command's)."""
        full = list(argv) if ns is None else [IP, "netns", "exec", ns, *argv]
        proc = subprocess.Popen(full, **kwargs)
        self.procs.append(proc)
        return proc

    def run(self, ns: str | None, argv: list[str], timeout: float = 15) -> subprocess.CompletedProcess:
        full = list(argv) if ns is None else [IP, "netns", "exec", ns, *argv]
        return subprocess.run(full, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    # ---- teardown

    def close(self) -> None:
        """Stops the processes this lab started (by pid), deletes its links and namespaces."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    pass
        for link in self.links:
            # Deleting one end deletes the pair; a link inside a namespace also goes with it.
            if link.ns_a is None:
                ip("link", "del", link.dev_a, check=False)
            elif link.ns_b is None:
                ip("link", "del", link.dev_b, check=False)
        for ns in reversed(self.namespaces):
            _kill_namespace_processes(ns)
            ip("netns", "del", ns, check=False)
        self.links.clear()
        self.namespaces.clear()

    def leftovers(self) -> list[str]:
        """Names of this lab that still exist (empty after `close()`)."""
        names = [l.split()[0] for l in ip("netns", "list", check=False).stdout.splitlines() if l.strip()]
        left = [n for n in names if n.startswith(f"{NS_PREFIX}{self.pid}-")]
        links = ip("-o", "link", "show", check=False).stdout
        left += re.findall(rf"\d+:\s+({DEV_PREFIX}{self.pid}x\d+[ab])[@:]", links)
        return left

    def __enter__(self) -> "NetLab":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
