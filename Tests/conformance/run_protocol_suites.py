#!/usr/bin/env python3
"""The official Engine.IO v4 and Socket.IO v5 protocol test suites, unchanged, against Relay.

The suites (socketio/engine.io-protocol and socketio/socket.io-protocol, `test-suite/test-suite.js`)
are not part of this repository: clone them beside it and point --engine-dir / --socket-dir at
their `test-suite/` directories. For each suite this script starts its own relay (port 0,
pingInterval 300, pingTimeout 200, maxPayload 1000000 and connectTimeout 1000, as the suites'
reference servers), copies the suite's test-suite.js unchanged into a temporary directory next to
Tests/conformance/protocol-suites/node-imports.js (which maps /engine.io/ to /socket.io/, sends
`Authorization: Bearer <JWT>` on every request and upgrade and points localhost:3000 at the
relay's port) and runs it with mocha (Debian packages: mocha chai node-ws node-fetch).

    .venv/bin/python Tests/conformance/run_protocol_suites.py [--suite engine|socket|both]

A test counts as passed when mocha passes it. A failing test is accepted only when EXPECTED_SKIP
below lists it, with why, and its failure message matches the entry's `fails_with`; anything else
fails the run (exit status 1). Output (git-ignored): `.build-conformance/protocol-suites/`:
`<suite>.json` (mocha's JSON report), `<suite>-relay.log`, `summary.json`.

Environment: RELAY_BIN (relay binary, default .build-release/release/relay).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent / "protocol-suites"
DEFAULT_OUT = ROOT / ".build-conformance" / "protocol-suites"
DEFAULT_DIRS = {"engine": "/work/peers/engine.io-protocol/test-suite",
                "socket": "/work/peers/socket.io-protocol/test-suite"}
NODE_MODULES = "/usr/share/nodejs"  # Debian's global node modules
ECHO = "needs the suite's echo server"

# Failing tests accepted, and why: only tests that need the reference test server's application
# (it echoes Engine.IO messages, emits `auth` after a Socket.IO connect, answers `message` with
# `message-back` and acks `message-with-ack`) or a custom namespace (Relay serves only `/`).
# `fails_with`: a regex the failure message must match (the failure is the one explained).
# Beware: the suites' connect helper never answers pings, so its "close the connection upon invalid
# format" tests also pass when the close is the ping timeout (~500 ms): see the durations in <suite>.json.
TIMEOUT = r"^Timeout of \d+ms exceeded"


def at(step: str) -> str:
    """The failure is the assertion of `step` (a regex of the expected value), or a timeout waiting for it."""
    return rf"to (deeply equal|start with) {step}|{TIMEOUT}"


EXPECTED_SKIP: dict[tuple[str, str], dict] = {
    ("engine", "Engine.IO protocol message HTTP long-polling sends and receives a payload containing one plain text packet"):
        {"why": f"{ECHO}: expects the server to echo `4hello`", "fails_with": at(r"'4hello'$")},
    ("engine", "Engine.IO protocol message HTTP long-polling sends and receives a payload containing several plain text packets"):
        {"why": f"{ECHO}: expects `4test1`, `4test2`, `4test3` echoed", "fails_with": at(r"'4test1")},
    ("engine", "Engine.IO protocol message HTTP long-polling sends and receives a payload containing plain text and binary packets"):
        {"why": f"{ECHO}: expects `4hello` and `bAQIDBA==` echoed", "fails_with": at(r"'4hello\\u001ebAQIDBA==")},
    ("engine", "Engine.IO protocol message WebSocket sends and receives a plain text packet"):
        {"why": f"{ECHO}: expects the server to echo `4hello`", "fails_with": at(r"'4hello'$")},
    ("engine", "Engine.IO protocol message WebSocket sends and receives a binary packet"):
        {"why": f"{ECHO}: expects the binary message 01 02 03 04 echoed", "fails_with": at(r"$")},  # ArrayBuffer: printed empty
    ("engine", "Engine.IO protocol upgrade successfully upgrades from HTTP long-polling to WebSocket"):
        {"why": f"{ECHO}: after the upgrade (3probe, noop 6, upgrade 5) it expects `4hello` echoed",
         "fails_with": at(r"'4hello'$")},
    ("engine", "Engine.IO protocol upgrade ignores HTTP requests with same sid after upgrade"):
        {"why": f"{ECHO}: after the 400 for the poll it expects `4hello` echoed", "fails_with": at(r"'4hello'$")},
    ("engine", "Engine.IO protocol upgrade ignores WebSocket connection with same sid after upgrade"):
        {"why": f"{ECHO}: after the 2nd socket's close it expects `4hello` echoed", "fails_with": at(r"'4hello'$")},
    ("socket", "Socket.IO protocol connect should allow connection to the main namespace"):
        {"why": f"{ECHO}: expects `42[\"auth\",{{}}]` emitted after the connect", "fails_with": at(r"'42\[\"auth\"")},
    ("socket", "Socket.IO protocol connect should allow connection to the main namespace with a payload"):
        {"why": f"{ECHO}: expects `42[\"auth\",{{\"token\":\"123\"}}]` emitted after the connect (and Relay takes "
                "`token` of the CONNECT payload as the client's JWT, so it refuses `123` with a 44 before that)",
         "fails_with": at(r"'42\[\"auth\"|'40'$")},
    ("socket", "Socket.IO protocol connect should allow connection to a custom namespace"):
        {"why": "custom namespace `/custom`: Relay serves only `/`", "fails_with": at(r"'4[02]/custom,")},
    ("socket", "Socket.IO protocol connect should allow connection to a custom namespace with a payload"):
        {"why": "custom namespace `/custom`: Relay serves only `/`", "fails_with": at(r"'4[02]/custom,")},
    ("socket", "Socket.IO protocol disconnect should disconnect from the main namespace"):
        {"why": f"{ECHO}: its connect helper takes the 3rd message for the `auth` emit, so Relay's first ping "
                "is used up there and never answered: no further ping comes (after `41` Relay keeps the Engine.IO session open, as the test wants; Tests/e2e/test_protocol_rules.py checks that)",
         "fails_with": at(r"'2'$")},
    ("socket", "Socket.IO protocol disconnect should connect then disconnect from a custom namespace"):
        {"why": "custom namespace `/custom`, then `message-back` from the echo server", "fails_with": at(r"'42\[\"message-back\"")},
    ("socket", "Socket.IO protocol message should send a plain-text packet"):
        {"why": f"{ECHO}: expects `message-back`", "fails_with": at(r"'42\[\"message-back\"")},
    ("socket", "Socket.IO protocol message should send a packet with binary attachments"):
        {"why": f"{ECHO}: expects `message-back` with the attachments", "fails_with": at(r"'452-\[\"message-back\"")},
    ("socket", "Socket.IO protocol message should send a plain-text packet with an ack"):
        {"why": f"{ECHO}: expects the ack of `message-with-ack`", "fails_with": at(r"'43456\[1,")},
    ("socket", "Socket.IO protocol message should send a packet with binary attachments and an ack"):
        {"why": f"{ECHO}: expects the ack of `message-with-ack` with the attachments", "fails_with": at(r"'462-789\[")},
}

# Mocha reporter: the spec reporter on stdout and mocha's JSON reporter into --reporter-option output=FILE.
# Debian's log-symbols is ESM-only, so mocha's check marks come out `undefined`: filled in here.
REPORTER = """const Mocha = require("mocha");
const { symbols } = Mocha.reporters.Base;
for (const [k, v] of Object.entries({ ok: "\u2713", err: "\u2716" })) if (typeof symbols[k] !== "string") symbols[k] = v;
module.exports = class SpecAndJSON extends Mocha.reporters.Spec {
  constructor(runner, options) { super(runner, options); new Mocha.reporters.JSON(runner, options); }
};
"""


def log(msg: str) -> None:
    print(f"protocol-suites: {msg}", flush=True)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def mint_jwt(secret: str, sub: str, ttl: int = 3600) -> str:
    now = int(time.time())
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    claims = b64url(json.dumps({"sub": sub, "iat": now, "exp": now + ttl}, separators=(",", ":")).encode())
    sig = hmac.new(secret.encode(), f"{header}.{claims}".encode(), hashlib.sha256).digest()
    return f"{header}.{claims}.{b64url(sig)}"


# Stopping by pid, and children that die with this script: the Autobahn runner's own.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_conformance import _die_with_parent, launch_relay, stop_process  # noqa: E402

PREEXEC = _die_with_parent if sys.platform.startswith("linux") else None


def start_relay(binary: Path, workdir: Path, log_path: Path, secret: str, startup_timeout: float) -> tuple[subprocess.Popen, int]:
    cmd = [str(binary), "--host", "127.0.0.1", "--port", "0", "--jwt-secret", secret,
           "--api-key", secrets.token_hex(12), "--admin-key", secrets.token_hex(12), "--db", str(workdir / "r.sqlite"),
           "--ping-interval", "300", "--ping-timeout", "200", "--max-payload", "1000000", "--connect-timeout", "1000"]
    return launch_relay(cmd, workdir, log_path, startup_timeout, "protocol-suites")


def run_suite(suite: str, suite_dir: Path, binary: Path, out: Path, mocha: str, bound: float) -> dict:
    """Runs one suite against a relay of its own; returns its mocha JSON report (or a stand-in)."""
    report = out / f"{suite}.json"
    report.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"relay-{suite}-suite-") as tmp:
        work = Path(tmp)
        shutil.copyfile(suite_dir / "test-suite.js", work / "test-suite.js")
        shutil.copyfile(HERE / "node-imports.js", work / "node-imports.js")
        (work / "package.json").write_text('{"type": "module"}\n')
        (work / "reporter.cjs").write_text(REPORTER)
        secret = secrets.token_urlsafe(32)
        relay = mocha_proc = None
        try:
            relay, port = start_relay(binary, work, out / f"{suite}-relay.log", secret, 30)
            log(f"{suite} suite ({suite_dir / 'test-suite.js'}): relay pid {relay.pid} on 127.0.0.1:{port}")
            env = dict(os.environ, RELAY_SUITE_PORT=str(port), RELAY_SUITE_TOKEN=mint_jwt(secret, f"protocol-suite-{suite}"),
                       NODE_PATH=os.pathsep.join(p for p in (NODE_MODULES, os.environ.get("NODE_PATH")) if p))
            # No --timeout: the suites' own (mocha's 2000 ms, 5000 ms for heartbeat). --exit: the
            # suites leave sockets open.
            cmd = [mocha, "--exit", "--reporter", str(work / "reporter.cjs"),
                   "--reporter-option", f"output={report}", "test-suite.js"]
            mocha_proc = subprocess.Popen(cmd, cwd=work, env=env, stdin=subprocess.DEVNULL, preexec_fn=PREEXEC)
            try:
                mocha_proc.wait(timeout=bound)
            except subprocess.TimeoutExpired:
                log(f"{suite} suite did not finish within {bound:.0f} s; stopping it")
                stop_process(mocha_proc, "mocha", grace=5)
                return {"error": f"timed out after {bound:.0f} s"}
        finally:
            if mocha_proc is not None:
                stop_process(mocha_proc, "mocha", grace=5)
            if relay is not None:
                stop_process(relay, "relay")
                log(f"relay stopped (exit status {relay.returncode})")
    if not report.exists():
        return {"error": f"mocha wrote no report (exit status {mocha_proc.returncode})"}
    return json.loads(report.read_text())


def evaluate(suite: str, report: dict) -> dict:
    if "error" in report:
        return {"passed": [], "failed": [], "expected": [], "unexpected": [{"title": "(suite run)", "message": report["error"], "why": ""}]}
    passed = [t["fullTitle"] for t in report.get("passes", [])]
    failed = [{"title": t["fullTitle"], "message": (t.get("err") or {}).get("message", "")} for t in report.get("failures", [])]
    expected, unexpected = [], []
    for f in failed:
        entry = EXPECTED_SKIP.get((suite, f["title"]))
        if entry and re.search(entry["fails_with"], f["message"]):
            expected.append({**f, "why": entry["why"]})
        else:
            unexpected.append({**f, "why": "listed in EXPECTED_SKIP, but fails otherwise" if entry else ""})
    ran = {t["fullTitle"] for t in report.get("tests", [])}
    return {
        "passed": passed, "failed": failed, "expected": expected, "unexpected": unexpected,
        "pending": [t["fullTitle"] for t in report.get("pending", [])],
        "skip_entries_now_passing": [title for (s, title) in EXPECTED_SKIP if s == suite and title in passed],
        "skip_entries_not_run": [title for (s, title) in EXPECTED_SKIP if s == suite and title not in ran],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", choices=["engine", "socket", "both"], default="both")
    parser.add_argument("--engine-dir", default=DEFAULT_DIRS["engine"], help="the engine.io-protocol test-suite/ directory")
    parser.add_argument("--socket-dir", default=DEFAULT_DIRS["socket"], help="the socket.io-protocol test-suite/ directory")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="output directory (default .build-conformance/protocol-suites)")
    parser.add_argument("--relay", default=os.environ.get("RELAY_BIN") or str(ROOT / ".build-release/release/relay"),
                        help="relay binary (default $RELAY_BIN or .build-release/release/relay)")
    parser.add_argument("--timeout", type=float, default=300.0, help="bound of the whole run, s (default 300)")
    args = parser.parse_args()

    def on_signal(signum, frame):  # the finally blocks stop mocha and the relay
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    suites = ["engine", "socket"] if args.suite == "both" else [args.suite]
    dirs = {"engine": Path(args.engine_dir), "socket": Path(args.socket_dir)}
    for s in suites:
        if not (dirs[s] / "test-suite.js").is_file():
            sys.exit(f"protocol-suites: no test-suite.js in {dirs[s]} (clone socketio/{s}.io-protocol; --{s}-dir)")
    mocha = shutil.which("mocha")
    if not mocha or not Path(NODE_MODULES, "chai").is_dir():
        sys.exit("protocol-suites: mocha or chai missing: apt-get install -y mocha chai node-ws node-fetch")
    binary = Path(args.relay)
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        sys.exit(f"protocol-suites: relay binary not found at {binary} (set RELAY_BIN)")
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").unlink(missing_ok=True)

    deadline = time.monotonic() + args.timeout
    results = {}
    for s in suites:
        remaining = deadline - time.monotonic()
        report = run_suite(s, dirs[s], binary, out, mocha, remaining) if remaining > 0 else {"error": "no time left"}
        results[s] = evaluate(s, report)

    total_passed = total_failed = total_skipped = 0
    for s, r in results.items():
        print(f"\n== {s} suite: {len(r['passed'])} passed, {len(r['unexpected'])} failed, "
              f"{len(r['expected'])} expected failures (EXPECTED_SKIP)")
        for f in r["unexpected"]:
            print(f"  FAIL {f['title']}\n       {f['message']}" + (f"\n       ({f['why']})" if f["why"] else ""))
        for f in r["expected"]:
            print(f"  skip {f['title']}\n       {f['message']}\n       why: {f['why']}")
        for title in r.get("skip_entries_now_passing", []):
            log(f"EXPECTED_SKIP entry passes now (remove it): {title}")
        for title in r.get("skip_entries_not_run", []):
            log(f"EXPECTED_SKIP entry names no test of the {s} suite: {title}")
        total_passed += len(r["passed"])
        total_failed += len(r["unexpected"])
        total_skipped += len(r["expected"])
    (out / "summary.json").write_text(json.dumps({"relay": str(binary), "suites": {s: str(dirs[s]) for s in suites},
                                                  "results": results}, indent=2) + "\n")
    log(f"reports: {out}")
    print(f"protocol-suites: {total_passed} passed, {total_failed} failed, {total_skipped} skipped")
    return 0 if total_failed == 0 and total_passed > 0 else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # before the handlers are installed
        sys.exit(130)
