#!/usr/bin/env node
// An independent fan-out probe (not relay-load): server CPU per delivery, closed loop.
//
// One Node process opens N WebSockets, all members of one room. Member 0 is the sender: it keeps
// W messages in flight. A message is complete when all N-1 other members have received it; each
// completion sends the next one, so the server is never offered more than W messages at once.
// After every socket has joined and the setup's own traffic (Relay's presence events) has stopped
// (no inbound frame but pings for --quiet seconds), it warms up (at least --warmup seconds and
// one whole window of messages complete) and measures:
//   --accounting drained (default): stop and let everything in flight arrive; read the server's
//     utime+stime from /proc/PID/stat; send for --duration seconds; stop, and read them again the
//     moment the last member has the last message. The CPU then covers exactly the window's
//     messages and their deliveries, with no in-flight edge, whatever W × (N-1) is; the window
//     (measured_s) includes the final drain, during which the server is still busy with the backlog.
//   --accounting steady: read the CPU twice while W messages stay in flight, --duration apart,
//     and count the deliveries that arrived in between. Its edge is up to W × (N-1) deliveries
//     either way, which at N = 10 000 and W = 64 is more than a 5 s window holds.
// CPU per delivery is the CPU over the deliveries (bench frames received by members); per event it
// is that × (N-1). Then every member must have received every message exactly once and in order;
// it prints one JSON object on stdout (progress goes to stderr).
//
// At a large W the latency is mostly queueing: W × (N-1) deliveries are always in flight, so a
// delivery waits about W × (N-1) / (deliveries/s). There p99 says how fast, not how responsive.
//
// Protocols:
//   socketio  Engine.IO v4 / Socket.IO v5 over WebSocket (/socket.io/?EIO=4&transport=websocket):
//             CONNECT 40{"token":JWT} (HS256 with --secret, sub user-<i/devices-per-user>, rooms
//             ["bench-*"]; no token without --secret), 42<id>["room:join",{"room":R}] with an ack
//             whose payload has "ok":true, pings 2 answered with 3, messages
//             42["bench:msg",{"room":R,"s":SEQ,"t":NS}] broadcast to the room's other members.
//   raw       plain JSON text frames (LoadTests/peers/ws-broadcast.js, the uWebSockets peer):
//             {"join":R}, then {"room":R,"s":SEQ,"t":NS} goes to the room's other members. There
//             is no join ack: the sender repeats a sync message until every member has seen one.
//
// Every phase has a deadline; a member that misses, duplicates or reorders a message, a socket
// that closes, a stall, or a deadline passed ends the run with exit code 2 and "error" in the
// JSON. Traffic goes to 127.0.0.0/8 only.
//
//   node LoadTests/probe/probe.js --port 18400 --protocol socketio --secret S --server-pid PID \
//     --members 100 --window 8 --duration 5
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const { execFileSync } = require('child_process');
let WebSocket;
try { WebSocket = require('ws'); } catch (_) { WebSocket = require('/usr/share/nodejs/ws'); }

// ---------------------------------------------------------------------------------------------
// Options

const DEFAULTS = {
  host: '127.0.0.1', port: 0, protocol: 'socketio', path: '', secret: process.env.RELAY_JWT_SECRET || '',
  'server-pid': 0, members: 10, window: 1, duration: 5, warmup: 2, room: 'bench-probe', event: 'bench:msg',
  'devices-per-user': 10, pad: 0, concurrency: 128, 'setup-timeout': 600, quiet: 1, 'settle-timeout': 600,
  accounting: 'drained', 'max-warmup': 120, 'drain-timeout': 300, 'stall-timeout': 10, 'source-addresses': -1, label: '',
  'at-window-start': '', 'at-window-end': '',
};
const HELP = `usage: node probe.js --port P [--protocol socketio|raw] [--members N] [--window W]
  [--duration S] [--warmup S] [--accounting drained|steady] [--server-pid PID] [--secret JWT_SECRET] [--devices-per-user K]
  [--room R] [--event E] [--pad BYTES] [--concurrency C] [--setup-timeout S] [--quiet S]
  [--settle-timeout S] [--max-warmup S] [--drain-timeout S] [--stall-timeout S] [--source-addresses K]
  [--label L] [--at-window-start CMD] [--at-window-end CMD]
--at-window-start/--at-window-end: a command (words split on spaces, no shell) run to its end
  just before the window's first CPU read and just after its last, e.g. callgrind_control -z PID
  and -d PID: a profile of exactly the window's messages.
defaults: ${JSON.stringify(DEFAULTS)}`;

function parseArgs(argv) {
  const o = { ...DEFAULTS };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '-h' || a === '--help') { console.log(HELP); process.exit(0); }
    if (!a.startsWith('--')) die(`unexpected argument ${a}\n${HELP}`);
    let key = a.slice(2), val;
    const eq = key.indexOf('=');
    if (eq >= 0) { val = key.slice(eq + 1); key = key.slice(0, eq); } else { val = argv[++i]; }
    if (!(key in DEFAULTS)) die(`unknown option --${key}\n${HELP}`);
    if (val === undefined) die(`--${key} needs a value`);
    o[key] = typeof DEFAULTS[key] === 'number' ? Number(val) : val;
    if (typeof DEFAULTS[key] === 'number' && !Number.isFinite(o[key])) die(`--${key}: not a number: ${val}`);
  }
  if (!o.host.startsWith('127.')) die('--host must be in 127.0.0.0/8');
  if (!(o.port > 0 && o.port < 65536)) die('--port is required');
  if (o.protocol !== 'socketio' && o.protocol !== 'raw') die('--protocol is socketio or raw');
  if (!(o.members >= 2 && o.members <= 60000)) die('--members is 2…60000 (and at most the open-file limit)');
  if (!(o.window >= 1 && o.window <= 100000)) die('--window is 1…100000');
  if (!(o.duration > 0 && o.duration <= 3600)) die('--duration is 0…3600 s');
  if (!(o.warmup >= 0 && o.warmup <= 600)) die('--warmup is 0…600 s');
  if (!(o['stall-timeout'] > 0)) die('--stall-timeout must be > 0');
  if (o.accounting !== 'drained' && o.accounting !== 'steady') die('--accounting is drained or steady');
  o['max-warmup'] = Math.max(o['max-warmup'], o.warmup);
  if (!/^[A-Za-z0-9_.:*-]+$/.test(o.room) || !/^[A-Za-z0-9_.:-]+$/.test(o.event)) die('--room/--event: plain names only');
  for (const k of ['at-window-start', 'at-window-end']) o[k] = o[k].split(' ').filter((w) => w.length > 0);
  if (o['source-addresses'] < 0) o['source-addresses'] = o.members > 20000 ? Math.ceil(o.members / 20000) : 0;
  if (!o.path) o.path = o.protocol === 'socketio' ? '/socket.io/?EIO=4&transport=websocket' : '/';
  o.devices = Math.max(1, Math.floor(o['devices-per-user']));
  return o;
}

function die(msg) { process.stderr.write(msg + '\n'); process.exit(64); }

// A window hook (--at-window-start/-end): run to its end, bounded; its failure fails the run,
// since a profile of the wrong span would be read as the window's.
function runHook(argv) {
  if (argv.length === 0) return;
  try {
    execFileSync(argv[0], argv.slice(1), { stdio: ['ignore', 'ignore', 'inherit'], timeout: 60000 });
  } catch (e) {
    die(`window hook ${argv.join(' ')} failed: ${e.message}`);
  }
}

const opt = parseArgs(process.argv.slice(2));
const N = opt.members, W = opt.window, SIO = opt.protocol === 'socketio';
const log = (...a) => process.stderr.write(`[probe ${((nowNs() - T0) / 1e9).toFixed(1)}s] ${a.join(' ')}\n`);

// ---------------------------------------------------------------------------------------------
// Clocks, /proc readings, a latency histogram

const nowNs = () => Number(process.hrtime.bigint());
const T0 = nowNs();
let CLK_TCK = 100;
try { CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100; } catch (_) { /* 100 */ }

/** The server's utime and stime in µs, or null. */
function serverCpu() {
  if (!opt['server-pid']) return null;
  let text;
  try { text = fs.readFileSync(`/proc/${opt['server-pid']}/stat`, 'utf8'); } catch (_) { return null; }
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // After "pid (comm) ": state is f[0]; utime and stime (fields 14 and 15 of stat(5)) are f[11], f[12].
  return { user: Number(f[11]) * 1e6 / CLK_TCK, system: Number(f[12]) * 1e6 / CLK_TCK };
}

/** Whole-machine busy and total jiffies from /proc/stat (how busy the box was meanwhile). */
function hostCpu() {
  try {
    const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const idle = line[3] + (line[4] || 0);
    const total = line.slice(0, 8).reduce((a, b) => a + b, 0);
    return { busy: total - idle, total };
  } catch (_) { return null; }
}

/** Log-linear histogram of µs: exact below 256, then 128 steps per power of two (< 0.8 % error). */
class Histogram {
  constructor() { this.b = new Float64Array(64 * 128); this.n = 0; this.max = 0; this.sum = 0; }
  record(us) {
    if (us < 0) us = 0;
    this.n++; this.sum += us; if (us > this.max) this.max = us;
    let i;
    if (us < 256) i = us | 0;
    else { const e = Math.floor(Math.log2(us)) - 7; i = e * 128 + Math.floor(us / 2 ** e); }
    if (i >= this.b.length) i = this.b.length - 1;
    this.b[i]++;
  }
  static valueOf(i) {
    if (i < 256) return i + 0.5;
    const e = Math.floor(i / 128) - 1, m = i - e * 128;
    return (m + 0.5) * 2 ** e;
  }
  percentile(p) {
    if (this.n === 0) return null;
    const want = Math.ceil(this.n * p / 100);
    let seen = 0;
    for (let i = 0; i < this.b.length; i++) { seen += this.b[i]; if (seen >= want) return Math.min(Histogram.valueOf(i), this.max); }
    return this.max;
  }
}

// ---------------------------------------------------------------------------------------------
// Tokens (HS256, as Relay's TokenIssuer signs them)

const b64url = (b) => Buffer.from(b).toString('base64').replace(/=+$/, '').replace(/\+/g, '-').replace(/\//g, '_');
const tokens = new Map();
function token(user) {
  if (!opt.secret) return '';
  let t = tokens.get(user);
  if (t) return t;
  const now = Math.floor(Date.now() / 1000);
  const head = b64url(JSON.stringify({ alg: 'HS256', typ: 'JWT' }));
  const body = b64url(JSON.stringify({ sub: user, iat: now, exp: now + 6 * 3600, rooms: ['bench-*'] }));
  const sig = b64url(crypto.createHmac('sha256', opt.secret).update(`${head}.${body}`).digest());
  t = `${head}.${body}.${sig}`;
  tokens.set(user, t);
  return t;
}

// ---------------------------------------------------------------------------------------------
// State

const members = new Array(N);
let phase = 'connect';     // connect → settle → warmup → measure → drain → done
let failed = null;         // the first error
let joined = 0, opened = 0, attempted = 0, synced = 0;
let setupFrames = 0;       // non-ping frames that are not bench messages (presence, acks, syncs…)
let pings = 0;             // Engine.IO pings answered
let lastSetupFrameNs = 0;  // arrival of the last such frame
let deliveries = 0;        // bench frames received, all members
let completed = 0;         // messages received by all N-1 members
let nextSeq = 0;           // next message to send
let sending = false;
let lastDeliveryNs = 0;
let warmupCapped = false;
let onDrained = null;                   // called once when the last message sent is complete
const slotSent = new Float64Array(W);   // send time (ns) of message s at s % W
const slotLeft = new Int32Array(W);     // members still to receive it
let deliveryLat = new Histogram();      // send → each member's receipt, µs
let eventLat = new Histogram();         // send → last member's receipt, µs
let sendBlockedNs = 0;                  // time the sender waited on its own socket's buffer
let sendWaitStart = 0;

const EVENT_PREFIX = Buffer.from(`42["${opt.event}"`);
const SEQ_KEY = Buffer.from('"s":');
const SYNC_KEY = Buffer.from('"sync":');
const OK_TRUE = /"ok"\s*:\s*true/;
const PAD = opt.pad > 0 ? ',"pad":"' + 'x'.repeat(opt.pad) + '"' : '';

function fail(msg, extra) {
  if (failed) return;
  failed = msg;
  log('FAILED:', msg);
  finish(extra);
}

function startsWith(buf, prefix) {
  return buf.length >= prefix.length && buf.compare(prefix, 0, prefix.length, 0, prefix.length) === 0;
}

function intAfter(buf, key) {
  let i = buf.indexOf(key);
  if (i < 0) return -1;
  i += key.length;
  while (i < buf.length && buf[i] === 32) i++;
  let v = 0, d = 0;
  while (i < buf.length && buf[i] >= 48 && buf[i] <= 57) { v = v * 10 + (buf[i] - 48); i++; d++; }
  return d > 0 ? v : -1;
}

function sourceAddress(i) {
  const k = opt['source-addresses'];
  if (!k) return undefined;
  const n = (i % k) + 2;
  return `127.0.${n >> 8}.${n & 255}`;
}

// ---------------------------------------------------------------------------------------------
// Sockets

function openMember(i) {
  attempted++;
  const m = { i, ws: null, joined: false, synced: false, expect: 0, received: 0, ackId: 0 };
  members[i] = m;
  const url = `ws://${opt.host}:${opt.port}${opt.path}`;
  const ws = new WebSocket(url, {
    perMessageDeflate: false, handshakeTimeout: 30000, maxPayload: 64 * 1024 * 1024,
    skipUTF8Validation: true, localAddress: sourceAddress(i),
  });
  m.ws = ws;
  ws.on('open', () => {
    opened++;
    if (!SIO) { ws.send(JSON.stringify({ join: opt.room })); markJoined(m); }
  });
  ws.on('message', (data) => onFrame(m, data));
  ws.on('error', (e) => { if (phase !== 'done') fail(`socket ${i}: ${e.message}`); });
  ws.on('close', (code, reason) => {
    if (phase !== 'done') fail(`socket ${i} closed by the server (${code} ${String(reason).slice(0, 120)}) in phase ${phase}`);
  });
}

function emit(m, text) { m.ws.send(text); }

function markJoined(m) {
  if (m.joined) return;
  m.joined = true;
  joined++;
  if (attempted < N && !failed) openMember(attempted);
}

function setupFrame() { setupFrames++; lastSetupFrameNs = nowNs(); }

function onFrame(m, buf) {
  if (buf.length === 0) return;
  const c0 = buf[0];
  if (SIO) {
    if (c0 === 0x34 /* 4 */ && buf.length > 1) {
      const c1 = buf[1];
      if (c1 === 0x32 /* 2: EVENT */) {
        if (startsWith(buf, EVENT_PREFIX)) return onBench(m, buf);
        return setupFrame();
      }
      setupFrame();
      if (c1 === 0x30 /* 0: CONNECT ok */) {
        m.ackId = 1;
        emit(m, `42${m.ackId}["room:join",${JSON.stringify({ room: opt.room })}]`);
      } else if (c1 === 0x33 /* 3: ACK */) {
        const text = buf.toString();
        if (intAfter(buf, Buffer.from('43')) !== m.ackId || !OK_TRUE.test(text)) return fail(`socket ${m.i}: room:join refused: ${text.slice(0, 200)}`);
        markJoined(m);
      } else if (c1 === 0x34 /* 4: CONNECT_ERROR */) {
        fail(`socket ${m.i}: CONNECT refused: ${buf.toString().slice(0, 200)}`);
      } else if (c1 === 0x31 /* 1: DISCONNECT */) {
        fail(`socket ${m.i}: disconnected by the server in phase ${phase}`);
      }
      return;
    }
    if (c0 === 0x32 /* 2: ping */) { pings++; m.ws.send('3'); return; }
    if (c0 === 0x30 /* 0: open */) {
      setupFrame();
      const t = token(`user-${Math.floor(m.i / opt.devices)}`);
      emit(m, t ? `40${JSON.stringify({ token: t })}` : '40');
      return;
    }
    if (c0 === 0x31 /* 1: close */) return fail(`socket ${m.i}: Engine.IO close in phase ${phase}`);
    return setupFrame();
  }
  // raw
  if (buf.indexOf(SEQ_KEY) >= 0) return onBench(m, buf);
  setupFrame();
  if (buf.indexOf(SYNC_KEY) >= 0 && !m.synced) { m.synced = true; synced++; }
}

function onBench(m, buf) {
  const s = intAfter(buf, SEQ_KEY);
  if (m.i === 0) return fail(`the sender received its own message ${s}`);
  if (s < 0 || s >= nextSeq) return fail(`member ${m.i} got a message never sent (s = ${s}): ${buf.toString().slice(0, 200)}`);
  if (s !== m.expect) {
    return fail(s > m.expect
      ? `member ${m.i} missed messages ${m.expect}…${s - 1} (got ${s})`
      : `member ${m.i} got message ${s} again or out of order (expected ${m.expect})`);
  }
  m.expect++;
  m.received++;
  deliveries++;
  const now = nowNs();
  lastDeliveryNs = now;
  const slot = s % W;
  deliveryLat.record((now - slotSent[slot]) / 1000);
  if (--slotLeft[slot] === 0) {
    if (s !== completed) return fail(`message ${s} completed before ${completed}`);
    completed++;
    eventLat.record((now - slotSent[slot]) / 1000);
    if (sending) sendNext();
    else if (completed === nextSeq && onDrained) { const f = onDrained; onDrained = null; f(); }
  }
}

const sender = () => members[0];

function sendNext() {
  const ws = sender().ws;
  // Backpressure: the window bounds what is in flight; if the sender's own socket still holds
  // unsent bytes, wait for it to drain instead of queueing more.
  if (ws.bufferedAmount > 1 << 20) {
    if (!sendWaitStart) {
      sendWaitStart = nowNs();
      ws._socket.once('drain', () => { sendBlockedNs += nowNs() - sendWaitStart; sendWaitStart = 0; fillWindow(); });
    }
    return;
  }
  const s = nextSeq++;
  const slot = s % W;
  const t = nowNs();
  slotSent[slot] = t;
  slotLeft[slot] = N - 1;
  const body = `{"room":"${opt.room}","s":${s},"t":${t}${PAD}}`;
  ws.send(SIO ? `42["${opt.event}",${body}]` : body);
}

function fillWindow() { while (sending && !failed && nextSeq - completed < W && !sendWaitStart) sendNext(); }

// ---------------------------------------------------------------------------------------------
// Phases

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(cond, seconds, what, onTimeout) {
  const end = nowNs() + seconds * 1e9;
  while (!failed && !cond()) {
    if (nowNs() > end) { fail(`timeout after ${seconds} s: ${what}${onTimeout ? ' — ' + onTimeout() : ''}`); break; }
    await sleep(20);
  }
  return !failed;
}

const snapshot = () => ({ ns: nowNs(), cpu: serverCpu(), host: hostCpu(), self: process.cpuUsage(), deliveries, completed, sent: nextSeq, setupFrames, pings });
let result = null, snapStart = null, snapEnd = null, settleSeconds = null, setupSeconds = null, rawSyncs = 0;

async function main() {
  // The server must be alive before and after: a dead PID would read as zero CPU.
  if (opt['server-pid'] && !serverCpu()) die(`no /proc/${opt['server-pid']}/stat`);
  log(`${N} members (${opt.protocol}), window ${W}, ${opt.duration} s measured after ${opt.warmup} s warm-up`);

  // 1. Connect and join, at most --concurrency handshakes in flight.
  for (let i = 0; i < Math.min(opt.concurrency, N); i++) openMember(i);
  let lastLog = nowNs();
  if (!await waitFor(() => {
    if (nowNs() - lastLog > 5e9) { lastLog = nowNs(); log(`joined ${joined}/${N}, ${setupFrames} setup frames`); }
    return joined === N;
  }, opt['setup-timeout'], 'connect and join', () => `${opened} open, ${joined} of ${N} joined`)) return;
  setupSeconds = (nowNs() - T0) / 1e9;
  log(`all ${N} joined in ${setupSeconds.toFixed(1)} s, ${setupFrames} setup frames so far`);

  // 2. Raw servers have no join ack: sync rounds until every member has seen one.
  phase = 'settle';
  if (!SIO) {
    const ok = await waitFor(() => {
      if (synced >= N - 1) return true;
      if (rawSyncs === 0 || (nowNs() - lastSetupFrameNs > 200e6 && rawSyncs < 50)) {
        rawSyncs++;
        lastSetupFrameNs = nowNs();
        sender().ws.send(JSON.stringify({ room: opt.room, sync: rawSyncs }));
      }
      return false;
    }, Math.min(60, opt['settle-timeout']), 'raw sync', () => `${synced} of ${N - 1} members saw a sync (${rawSyncs} sent)`);
    if (!ok) return;
  }

  // 3. Settle: no setup frame (presence, acks, syncs) for --quiet seconds.
  const settleStart = nowNs();
  if (!await waitFor(() => nowNs() - Math.max(lastSetupFrameNs, settleStart) >= opt.quiet * 1e9,
    opt['settle-timeout'], 'setup traffic settling', () => `${setupFrames} setup frames, last ${((nowNs() - lastSetupFrameNs) / 1e9).toFixed(2)} s ago`)) return;
  settleSeconds = (nowNs() - settleStart) / 1e9;
  log(`settled after ${settleSeconds.toFixed(1)} s (${setupFrames} setup frames in all)`);

  // 4. Warm-up: at least --warmup seconds and at least one whole window completed (the first W
  // messages start together; after them sends follow completions), at most --max-warmup seconds.
  // A watchdog fails the run when no delivery arrives for --stall-timeout seconds.
  phase = 'warmup';
  sending = true;
  lastDeliveryNs = nowNs();
  const watchdog = setInterval(() => {
    if (phase !== 'done' && nextSeq > completed && nowNs() - lastDeliveryNs > opt['stall-timeout'] * 1e9) fail(`stalled in phase ${phase}: ${stallReport()}`);
  }, 250);
  const warmStart = nowNs();
  fillWindow();
  while (!failed && (nowNs() - warmStart < opt.warmup * 1e9 || completed < W)) {
    if (nowNs() - warmStart > opt['max-warmup'] * 1e9) { warmupCapped = true; log(`warm-up capped at ${opt['max-warmup']} s with ${completed} messages complete`); break; }
    await sleep(20);
  }
  if (failed) return clearInterval(watchdog);
  log(`warm-up done after ${((nowNs() - warmStart) / 1e9).toFixed(1)} s: ${completed} messages complete, ${deliveries} deliveries`);

  if (opt.accounting === 'drained') {
    // 5. Drained accounting: stop, let everything in flight arrive, read the CPU with nothing in
    // flight; send for --duration seconds; stop again and read the CPU the moment the last
    // member has the last message. The CPU read covers exactly the window's messages and their
    // deliveries (plus pings and the server's idle timers), however many are in flight at once.
    phase = 'drain';
    sending = false;
    if (!await waitFor(() => completed === nextSeq, opt['drain-timeout'], 'warm-up messages', stallReport)) return clearInterval(watchdog);
    await sleep(200);
    runHook(opt['at-window-start']);
    phase = 'measure';
    deliveryLat = new Histogram();
    eventLat = new Histogram();
    snapStart = snapshot();
    sending = true;
    fillWindow();
    await sleep(opt.duration * 1000);
    if (failed) return clearInterval(watchdog);
    phase = 'drain';
    const drained = new Promise((resolve) => { onDrained = () => { snapEnd = snapshot(); runHook(opt['at-window-end']); resolve(); }; });
    sending = false;
    if (completed === nextSeq && onDrained) onDrained();
    log(`sent ${nextSeq - snapStart.sent} messages in ${opt.duration} s; draining ${nextSeq - completed}`);
    await Promise.race([drained, waitFor(() => completed === nextSeq && snapEnd, opt['drain-timeout'], 'last messages', stallReport)]);
    if (failed) return clearInterval(watchdog);
  } else {
    // 5. Steady accounting: read the CPU twice while W messages stay in flight; what was in
    // flight at either end is counted by whichever side of the window it arrived on.
    phase = 'measure';
    deliveryLat = new Histogram();
    eventLat = new Histogram();
    runHook(opt['at-window-start']);
    snapStart = snapshot();
    await sleep(opt.duration * 1000);
    snapEnd = snapshot();
    runHook(opt['at-window-end']);
    if (failed) return clearInterval(watchdog);
    log(`measured ${snapEnd.deliveries - snapStart.deliveries} deliveries, ${snapEnd.completed - snapStart.completed} messages complete; draining ${nextSeq - completed}`);
    phase = 'drain';
    sending = false;
    await waitFor(() => completed === nextSeq, opt['drain-timeout'], 'last messages', stallReport);
  }
  // 6. Every member has every message (in order: checked as they arrived).
  clearInterval(watchdog);
  if (failed) return;
  for (let i = 1; i < N; i++) {
    if (members[i].expect !== nextSeq) return fail(`member ${i} received ${members[i].expect} of ${nextSeq} messages`);
  }
  if (opt['server-pid'] && !serverCpu()) return fail('the server exited');
  finish();
}

/** Who is behind: the oldest incomplete message and some members still waiting for it. */
function stallReport() {
  const waiting = [];
  let behind = 0;
  for (let i = 1; i < N; i++) if (members[i].expect <= completed) { behind++; if (waiting.length < 10) waiting.push(`${i}@${members[i].expect}`); }
  return `${nextSeq - completed} messages incomplete; message ${completed} still missing at ${behind} members (member@next expected: ${waiting.join(', ')}); last delivery ${((nowNs() - lastDeliveryNs) / 1e9).toFixed(1)} s ago`;
}

function finish(extra) {
  if (phase === 'done') return;
  phase = 'done';
  const r = {
    probe: 'probe.js', label: opt.label || undefined, protocol: opt.protocol, port: opt.port, server_pid: opt['server-pid'] || null,
    accounting: opt.accounting, members: N, window: W, duration_s: opt.duration, warmup_s: opt.warmup, devices_per_user: SIO ? opt.devices : undefined,
    source_addresses: opt['source-addresses'], setup_s: setupSeconds, settle_s: settleSeconds, setup_frames: setupFrames,
    sent_total: nextSeq, completed_total: completed,
  };
  if (snapStart && snapEnd) {
    const secs = (snapEnd.ns - snapStart.ns) / 1e9;
    const del = snapEnd.deliveries - snapStart.deliveries;
    const ev = snapEnd.completed - snapStart.completed;
    Object.assign(r, {
      measured_s: +secs.toFixed(3), deliveries: del, events: ev, sent: snapEnd.sent - snapStart.sent,
      deliveries_per_event: ev ? +(del / ev).toFixed(3) : null,
      deliveries_per_s: Math.round(del / secs), events_per_s: Math.round(ev / secs),
      latency_p50_ms: ms(deliveryLat.percentile(50)), latency_p99_ms: ms(deliveryLat.percentile(99)),
      latency_max_ms: ms(deliveryLat.max), event_latency_p50_ms: ms(eventLat.percentile(50)), event_latency_p99_ms: ms(eventLat.percentile(99)),
      pings_in_window: snapEnd.pings - snapStart.pings, setup_frames_in_window: snapEnd.setupFrames - snapStart.setupFrames,
      window_turns: +(ev / W).toFixed(2), warmup_capped: warmupCapped, sender_blocked_ms: +(sendBlockedNs / 1e6).toFixed(1),
    });
    if (snapStart.cpu && snapEnd.cpu && del > 0) {
      const u = snapEnd.cpu.user - snapStart.cpu.user, s = snapEnd.cpu.system - snapStart.cpu.system;
      Object.assign(r, {
        server_cpu_s: +((u + s) / 1e6).toFixed(3), server_cpu_percent: +((u + s) / 1e4 / secs).toFixed(1),
        cpu_us_per_delivery: round3((u + s) / del), user_us_per_delivery: round3(u / del), system_us_per_delivery: round3(s / del),
        // Per event: per delivery × (N-1), i.e. over the deliveries' worth of events; the count
        // of messages completed in the window differs from it by the window's in-flight edge.
        cpu_us_per_event: round3((u + s) * (N - 1) / del), user_us_per_event: round3(u * (N - 1) / del), system_us_per_event: round3(s * (N - 1) / del),
      });
    }
    const self = (snapEnd.self.user - snapStart.self.user + snapEnd.self.system - snapStart.self.system) / 1e6;
    r.probe_cpu_percent = +(self / secs * 100).toFixed(1);
    if (snapStart.host && snapEnd.host) {
      const busy = snapEnd.host.busy - snapStart.host.busy, total = snapEnd.host.total - snapStart.host.total;
      const cores = total / (secs * CLK_TCK);
      // Everything else on the machine meanwhile, in cores: busy − server − probe.
      const serverCores = r.server_cpu_s != null ? r.server_cpu_s / secs : 0;
      r.host_busy_percent = +(busy / total * 100).toFixed(1);
      r.host_other_cores = +Math.max(0, busy / (secs * CLK_TCK) - serverCores - self / secs).toFixed(2);
      r.host_cores = +cores.toFixed(1);
    }
  }
  if (failed) r.error = failed;
  if (extra) Object.assign(r, extra);
  result = r;
  process.stdout.write(JSON.stringify(r) + '\n');
  // Tear down without close handshakes (a server announcing N leaves would only delay the exit).
  for (const m of members) if (m && m.ws) { try { m.ws.terminate(); } catch (_) { /* gone */ } }
  setTimeout(() => process.exit(failed ? 2 : 0), 100);
}

const ms = (us) => (us == null ? null : +(us / 1000).toFixed(3));
const round3 = (x) => +x.toFixed(3);

// The whole run is bounded even if a phase's own deadline logic were to hang.
const overall = opt['setup-timeout'] + opt['settle-timeout'] + opt['max-warmup'] + opt.duration + opt['drain-timeout'] + 90;
setTimeout(() => { fail(`overall time limit of ${overall} s passed in phase ${phase}`); setTimeout(() => process.exit(2), 500); }, overall * 1000).unref();
process.on('SIGINT', () => { fail('interrupted'); });
process.on('SIGTERM', () => { fail('terminated'); });
main().catch((e) => fail(`internal error: ${e && e.stack || e}`));
