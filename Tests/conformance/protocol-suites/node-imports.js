// Stand-in for the `node-imports.js` of the official Engine.IO / Socket.IO protocol test suites
// (socketio/engine.io-protocol and socketio/socket.io-protocol, `test-suite/`), so that their
// unchanged `test-suite.js` runs against Relay. Tests/conformance/run_protocol_suites.py copies
// the suite's test-suite.js and this file side by side into a temporary directory (with a
// package.json of `"type": "module"`) and runs mocha there; the suite does
// `await import("./node-imports.js")` and then uses the globals set below.
//
// What differs from the suites' own node-imports.js:
// - Relay serves Engine.IO/Socket.IO at /socket.io/ only: `/engine.io/` in a URL becomes `/socket.io/`.
// - Relay needs a client token: every fetch and every WebSocket upgrade carries
//   `Authorization: Bearer $RELAY_SUITE_TOKEN`.
// - The suites hit localhost:3000; the relay listens on a free port: `localhost:3000` (and
//   127.0.0.1:3000) become `127.0.0.1:$RELAY_SUITE_PORT`. Without RELAY_SUITE_PORT, URLs keep port 3000.
// - Modules come from Debian's packages (mocha, chai, node-ws, node-fetch) through require()
//   and NODE_PATH (Node's ESM resolver ignores NODE_PATH; their CommonJS entries honour it).
// - Debian has no chai-string: `chaiStartsWith` below provides the one assertion the suites use,
//   `expect(x).to.startsWith(prefix)` (alias `startWith`), as chai-string defines it.

import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const chai = require("chai");
const nodeFetch = require("node-fetch"); // Debian's CommonJS build of node-fetch 3
const { WebSocket: BaseWebSocket } = require("ws");

const token = process.env.RELAY_SUITE_TOKEN || "";
const port = process.env.RELAY_SUITE_PORT || "";

if (!token) {
  throw new Error("node-imports.js: RELAY_SUITE_TOKEN is not set (a client JWT for the relay)");
}

export function relayURL(url) {
  const u = new URL(String(url));
  if (port && (u.hostname === "localhost" || u.hostname === "127.0.0.1") && u.port === "3000") {
    u.hostname = "127.0.0.1";
    u.port = port;
  }
  u.pathname = u.pathname.replace(/^\/engine\.io(\/|$)/, "/socket.io$1");
  return u.toString();
}

function withBearer(headers) {
  const h = new nodeFetch.Headers(headers || {});
  h.set("Authorization", `Bearer ${token}`);
  return h;
}

function fetch(resource, init = {}) {
  return nodeFetch(relayURL(resource), { ...init, headers: withBearer(init.headers) });
}

// ws's WebSocket with the URL rewritten and the bearer header on the upgrade request. Everything
// else (addEventListener with {once}, on("error"), binaryType, send, close) is ws's own.
class WebSocket extends BaseWebSocket {
  constructor(address, protocols, options) {
    if (protocols && typeof protocols === "object" && !Array.isArray(protocols)) {
      options = protocols;
      protocols = undefined;
    }
    const opts = { ...(options || {}) };
    opts.headers = { ...(opts.headers || {}), Authorization: `Bearer ${token}` };
    super(relayURL(address), protocols, opts);
  }
}

function chaiStartsWith(chaiLib, utils) {
  function startsWith(prefix) {
    const actual = utils.flag(this, "object");
    this.assert(
      typeof actual === "string" && typeof prefix === "string" && actual.startsWith(prefix),
      "expected #{this} to start with #{exp}",
      "expected #{this} not to start with #{exp}",
      prefix,
      actual
    );
  }
  chaiLib.Assertion.addMethod("startsWith", startsWith);
  chaiLib.Assertion.addMethod("startWith", startsWith);
}

chai.use(chaiStartsWith);

globalThis.fetch = fetch;
globalThis.WebSocket = WebSocket;
globalThis.chai = chai;
