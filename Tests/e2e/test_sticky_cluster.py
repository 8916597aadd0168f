"""Two relay nodes on a real redis-server behind the real load balancers of deploy/ — HAProxy
(deploy/haproxy.cfg) and nginx (deploy/nginx.conf), each with only its addresses, ports and
paths rewritten, the balancing and stickiness lines kept verbatim — and the stock clients
connecting through them as users run them: python-socketio and the official browser client,
with default options (long-polling first, then the upgrade), polling only, and WebSocket only.
Each client must receive what happens on the *other* node: a client connected directly to it,
and the backend emit API called on it.

Long-polling needs every request of a session to reach the node that holds it (deploy/README.md,
"Sticky sessions").
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import aiohttp
import pytest

from browser_client import BrowserPage, browser, page_server  # noqa: F401 - fixtures
from conftest import RelayProcess
from helpers import ADMIN_KEY, REPO_ROOT, ROOM, TIMEOUT, Clients, async_test, emit_api, http, mint_token
from redis_servers import assert_no_cross_slot, free_port, redis_kind, redis_server  # noqa: F401 - fixtures
from test_cluster import eventually, wait_linked
from test_stock_clients import connect_python, sids_of

DEPLOY = REPO_ROOT / "deploy"
HEARTBEAT_MS = 300

# The lines that choose a node: kept verbatim in the configuration the test runs.
BALANCING = re.compile(r"^\s*(balance|hash-type|stick|stick-table|cookie|use-server|hash|least_conn|ip_hash|map|upstream|proxy_pass)\b")


def balancing_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if BALANCING.match(line)]


def haproxy_config(listen_port: int, node_ports: list[int]) -> str:
    """deploy/haproxy.cfg with the frontend bound to 127.0.0.1:listen_port, relayN at
    127.0.0.1:node_ports[N-1], and no PROXY header to the nodes. Nothing else changes."""
    text = (DEPLOY / "haproxy.cfg").read_text()
    out, n = re.subn(r"^(\s*bind\s+)\S*:8080\b", rf"\g<1>127.0.0.1:{listen_port}", text, flags=re.M)
    assert n == 1, "deploy/haproxy.cfg has one `bind …:8080`"
    for i, port in enumerate(node_ports, 1):
        out, n = re.subn(rf"^(\s*server\s+relay{i}\s+)relay{i}:8080\b", rf"\g<1>127.0.0.1:{port}", out, flags=re.M)
        assert n == 1, f"deploy/haproxy.cfg has one `server relay{i} relay{i}:8080`"
    assert not re.search(r"\brelay\d+:8080\b", out), "a node address was left unrewritten"
    # The client-address layer (PROXY protocol v2 to the nodes) is test_proxy.py's subject; here
    # clients also talk to the nodes directly, so the nodes run without it.
    out, n = re.subn(r"\bsend-proxy-v2\s+", "", out)
    assert n == 1, "deploy/haproxy.cfg sends the PROXY header from its default-server line"
    assert balancing_lines(out) == balancing_lines(text)
    return out


def nginx_config(listen_port: int, node_ports: list[int], workdir: Path) -> str:
    """deploy/nginx.conf listening on 127.0.0.1:listen_port, relayN at 127.0.0.1:node_ports[N-1]
    (in every upstream), its pid and logs in `workdir`. Nothing else changes."""
    text = (DEPLOY / "nginx.conf").read_text()
    out, n = re.subn(r"^(\s*listen\s+)8080\b", rf"\g<1>127.0.0.1:{listen_port}", text, flags=re.M)
    assert n == 1, "deploy/nginx.conf has one `listen 8080`"
    for i, port in enumerate(node_ports, 1):
        out, n = re.subn(rf"^(\s*server\s+)relay{i}:8080\b", rf"\g<1>127.0.0.1:{port}", out, flags=re.M)
        assert n >= 1, f"deploy/nginx.conf names relay{i}:8080"
    assert not re.search(r"\brelay\d+:8080\b", out), "a node address was left unrewritten"
    out, n = re.subn(r"^pid\s+\S+;", f"pid {workdir / 'nginx.pid'};", out, flags=re.M)
    assert n == 1
    # Paths only: logs and temporary files in the test's directory.
    out = out.replace("http {", "http {\n    access_log %s;\n    client_body_temp_path %s;\n    proxy_temp_path %s;" % (
        workdir / "access.log", workdir / "client_body", workdir / "proxy"), 1)
    assert balancing_lines(out) == balancing_lines(text)
    return out


class Balancer:
    """HAProxy or nginx in the foreground on 127.0.0.1, started and stopped by pid."""

    def __init__(self, kind: str, workdir: Path, node_ports: list[int]):
        self.kind = kind
        self.port = free_port()
        self.workdir = workdir
        self.output: deque[str] = deque(maxlen=400)
        self.proc: subprocess.Popen | None = None
        binary = shutil.which(kind)
        assert binary, f"{kind} is not installed (scripts/install-test-deps.sh installs it)"
        conf = workdir / f"{kind}.conf"
        if kind == "haproxy":
            conf.write_text(haproxy_config(self.port, node_ports))
            check = [binary, "-c", "-f", str(conf)]
            # -n: the process's connection limit (the config's maxconn needs ~2M descriptors,
            # more than a test machine allows); it changes no routing.
            self.args = [binary, "-db", "-n", "4096", "-f", str(conf)]
        else:
            conf.write_text(nginx_config(self.port, node_ports, workdir))
            error_log = str(workdir / "error.log")
            check = [binary, "-t", "-c", str(conf), "-e", error_log]
            self.args = [binary, "-c", str(conf), "-e", error_log, "-g", "daemon off;"]
        r = subprocess.run(check, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, f"{kind} refuses the derived config:\n{r.stdout}{r.stderr}\n{conf.read_text()}"

    def start(self) -> "Balancer":
        self.proc = subprocess.Popen(self.args, cwd=self.workdir, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

        def drain():
            for raw in self.proc.stdout:
                self.output.append(raw.decode("utf-8", "replace").rstrip())

        threading.Thread(target=drain, name=f"{self.kind}-output", daemon=True).start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        extra = ""
        error_log = self.workdir / "error.log"
        if error_log.exists():
            extra = "\n" + "\n".join(error_log.read_text(errors="replace").splitlines()[-50:])
        return "\n".join(self.output) + extra

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture(params=["haproxy", "nginx"])
def sticky_cluster(request, tmp_path, page_server, redis_server):  # noqa: F811 - the imported fixture
    """Redis (each kind), relay nodes a and b (admitting the test page's origin), and a balancer
    in front."""
    redis = redis_server
    nodes: list[RelayProcess] = []
    balancer: Balancer | None = None
    try:
        for name in ("a", "b"):
            d = tmp_path / name
            d.mkdir()
            nodes.append(RelayProcess(d, ["--redis", redis.url, "--node-id", f"node-{name}",
                                          "--cluster-heartbeat-ms", str(HEARTBEAT_MS),
                                          "--allowed-origins", page_server.origin]).start())
        lb_dir = tmp_path / request.param
        lb_dir.mkdir()
        balancer = Balancer(request.param, lb_dir, [n.port for n in nodes]).start()
        yield redis, nodes[0], nodes[1], balancer
        assert_no_cross_slot(redis, *nodes)
    finally:
        if balancer is not None:
            balancer.stop()
        for n in nodes:
            n.stop()


async def ready_through(balancer: Balancer) -> None:
    """The balancer answers and forwards (its health checks found a node)."""
    async def ready():
        if balancer.proc.poll() is not None:
            raise AssertionError(f"{balancer.kind} exited {balancer.proc.returncode}:\n{balancer.log()}")
        try:
            status, _ = await http(balancer, "GET", "/readyz", key=None)
        except OSError:
            return False
        return status == 200
    await eventually(ready, timeout=30, what=f"{balancer.kind} forwarding /readyz")


async def home_and_other(a, b, user: str, sid: str):
    """The node holding `user`'s session (its sid) and the other one."""
    on_a, on_b = await sids_of(a, user), await sids_of(b, user)
    assert sorted(on_a + on_b) == [sid], f"one session, on one node: a={on_a} b={on_b} sid={sid}"
    return (a, b) if on_a else (b, a)


async def check_cross_node(lb_client_receives, lb_client_sends, user: str, home, other, c: Clients, tag: str):
    """A peer connected directly to the *other* node and that node's backend emit API reach the
    client that came through the balancer, and its events reach the peer."""
    peer = await c.connect(other, f"peer-{tag}")
    await peer.join(ROOM)
    await peer.ok("message:reaction", {"room": ROOM, "messageId": f"x-{tag}", "emoji": "🔁", "action": "add"})
    got = await lb_client_receives("message:reaction", messageId=f"x-{tag}")
    assert got["from"] == f"peer-{tag}", got
    status, body = await emit_api(other, "notification:new", {"user": user}, {"title": f"from the other node {tag}"})
    assert status == 200, body
    await lb_client_receives("notification:new", title=f"from the other node {tag}")
    await lb_client_sends("note:new", {"room": ROOM, "text": f"back {tag}"})
    assert (await peer.expect("note:new", text=f"back {tag}"))["from"] == user


CASES = [
    pytest.param(None, "websocket", id="default"),
    pytest.param(["polling"], "polling", id="polling"),
    pytest.param(["websocket"], "websocket", id="websocket"),
]


@pytest.mark.parametrize("transports,transport", CASES)
@async_test
async def test_python_socketio_through_the_balancer(sticky_cluster, transports, transport):
    redis, a, b, balancer = sticky_cluster
    await wait_linked(a, b)
    await ready_through(balancer)
    tag = f"py-{balancer.kind}-{transport}-{'default' if transports is None else 'forced'}"
    user = f"sticky-{tag}"
    async with Clients() as c:
        client = c.new(user)
        await connect_python(client, balancer, mint_token(user), transports)
        assert client.sio.transport() == transport
        home, other = await home_and_other(a, b, user, client.sio.get_sid())
        await client.join(ROOM)

        async def receives(event, **fields):
            return await client.expect(event, **fields)

        await check_cross_node(receives, client.ok, user, home, other, c, tag)
        assert client.connected and client.sio.transport() == transport
        # Still one session on the same node: every request of it reached that node.
        assert await sids_of(home, user) == [client.sio.get_sid()] and await sids_of(other, user) == []


@pytest.mark.parametrize("transports,transport", CASES)
@async_test
async def test_browser_client_through_the_balancer(sticky_cluster, browser, page_server, transports, transport):  # noqa: F811
    redis, a, b, balancer = sticky_cluster
    await wait_linked(a, b)
    await ready_through(balancer)
    tag = f"web-{balancer.kind}-{transport}-{'default' if transports is None else 'forced'}"
    user = f"sticky-{tag}"
    page = await BrowserPage.open(browser, page_server)
    try:
        async with Clients() as c:
            opts = {"auth": {"token": mint_token(user)}, **({"transports": transports} if transports else {})}
            state = await page.connect("web", balancer.url, opts)
            home, other = await home_and_other(a, b, user, state["id"])
            await page.ok("web", "room:join", {"room": ROOM})
            if transports is None:
                await page.expect("web", "upgrade", transport="websocket")
            since = await page.mark()

            async def receives(event, **fields):
                return await page.expect_event("web", event, since=since, **fields)

            async def sends(event, data):
                return await page.ok("web", event, data)

            await check_cross_node(receives, sends, user, home, other, c, tag)
            final = await page.state("web")
            assert final["connected"] and final["transport"] == transport and final["id"] == state["id"], final
            assert not [e for e in await page.seen("web") if e["kind"] in ("disconnect", "connect_error")], \
                "the session never broke"
            assert await sids_of(home, user) == [state["id"]] and await sids_of(other, user) == []
            await page.disconnect("web")
    finally:
        await page.close()


class StubNode:
    """A stand-in relay node that answers every request with its name; `hold=1` requests are
    held open (like a long-poll) until `release()`. Threads, stopped by `stop()`."""

    def __init__(self, name: str):
        self.name = name
        self.released = threading.Event()
        node = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                if "hold=1" in self.path:
                    node.released.wait(TIMEOUT)
                body = node.name.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, *args):
                pass

        class Server(ThreadingHTTPServer):
            request_queue_size = 128

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name=f"stub-{name}", daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def release(self) -> None:
        self.released.set()

    def stop(self) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()


def without_stickiness(kind: str, text: str) -> str:
    """The same config with its stickiness taken out (the control of the routing test)."""
    if kind == "haproxy":
        out = re.sub(r"^\s*stick(-table)?\s.*\n", "", text, flags=re.M)
    else:
        out = text.replace("proxy_pass http://$relay_upstream;", "proxy_pass http://relay_nodes;")
    assert out != text
    return out


async def routed(session, balancer: Balancer, query: str, method: str = "GET") -> str:
    async with session.request(method, f"{balancer.url}/socket.io/?EIO=4&{query}", data=b"40" if method == "POST" else None) as r:
        assert r.status == 200, f"{balancer.kind}: {method} {query} -> HTTP {r.status}\n{balancer.log()}"
        return await r.text()


async def polling_routes(balancer: Balancer, nodes: list[StubNode]) -> tuple[str, list[str]]:
    """Where a polling session's requests go while its long-poll is held on its node: (the
    handshake's node, the nodes of the following requests with its sid)."""
    timeout = aiohttp.ClientTimeout(total=TIMEOUT + 5)
    async with aiohttp.ClientSession(timeout=timeout, trust_env=False) as session:
        # Fresh WebSocket handshakes (no sid) reach both nodes: both are up, and they are not pinned.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        seen: set[str] = set()
        while seen != {n.name for n in nodes}:
            assert loop.time() < deadline, f"{balancer.kind}: WebSocket handshakes reached only {seen}\n{balancer.log()}"
            assert balancer.proc.poll() is None, f"{balancer.kind} exited:\n{balancer.log()}"
            try:  # until the balancer listens and found both nodes up
                async with session.get(f"{balancer.url}/socket.io/?EIO=4&transport=websocket") as r:
                    if r.status == 200:
                        seen.add(await r.text())
            except aiohttp.ClientConnectionError:
                pass
            await asyncio.sleep(0.05)
        home = await routed(session, balancer, "transport=polling")
        held = asyncio.create_task(routed(session, balancer, "transport=polling&sid=S1&hold=1"))
        try:
            later = [await routed(session, balancer, "transport=polling&sid=S1", "POST"),
                     await routed(session, balancer, "transport=polling&sid=S1", "POST"),
                     await routed(session, balancer, "transport=websocket&sid=S1")]
        finally:
            for n in nodes:
                n.release()
            await asyncio.wait([held], timeout=TIMEOUT)  # never left running past the session
        later.insert(0, held.result())
        return home, later


@pytest.mark.parametrize("kind", ["haproxy", "nginx"])
@async_test
async def test_balancer_pins_every_request_of_a_polling_session(kind, tmp_path):
    """Independent of Relay: stand-in nodes name themselves. Every request of a polling session
    (the handshake, a held long-poll, posts, the upgrade) reaches the handshake's node, while
    WebSocket handshakes are spread; the same config without its stickiness lines splits the
    session (so this test notices when stickiness is lost)."""
    for sticky in (True, False):
        nodes = [StubNode("relay1"), StubNode("relay2")]
        workdir = tmp_path / f"{kind}-{'sticky' if sticky else 'control'}"
        workdir.mkdir()
        balancer = Balancer(kind, workdir, [n.port for n in nodes])
        if not sticky:
            conf = workdir / f"{kind}.conf"
            conf.write_text(without_stickiness(kind, conf.read_text()))
        balancer.start()
        try:
            home, later = await polling_routes(balancer, nodes)
        finally:
            balancer.stop()
            for n in nodes:
                n.stop()
        if sticky:
            assert later == [home] * len(later), f"{kind}: handshake on {home}, then {later}"
        else:
            assert later != [home] * len(later), f"{kind} without stickiness kept {later} on {home}: the control proves nothing"


def test_derived_configs_keep_the_stickiness_lines(tmp_path):
    """The configs the tests run differ from deploy/ only in addresses, ports and paths."""
    cfg = haproxy_config(18080, [18081, 18082])
    assert "stick on src" in cfg and "balance leastconn" in cfg
    conf = nginx_config(18080, [18081, 18082], tmp_path)
    assert "hash $binary_remote_addr consistent;" in conf and "proxy_pass http://$relay_upstream;" in conf
