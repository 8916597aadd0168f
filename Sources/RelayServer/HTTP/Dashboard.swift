/// `GET /dashboard`: a self-contained live page. It holds no data: it asks for the admin key
/// once, keeps it in `sessionStorage` (never in a URL), and reads the key-protected stats
/// stream (`/admin/v1/stream`, server-sent events over `fetch`, so the key travels in the
/// `Authorization` header). Charts are drawn on canvas; nothing is loaded from elsewhere.
enum Dashboard {
    static let html = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Relay dashboard</title>
<style>
  :root { --bg:#0f1419; --panel:#1a2029; --text:#e6e9ef; --muted:#8b95a5; --accent:#4fb3ff; --warn:#ffb347; --bad:#ff6b6b; }
  * { box-sizing: border-box; }
  body { margin:0; font:14px/1.4 system-ui, -apple-system, Segoe UI, Roboto, sans-serif; background:var(--bg); color:var(--text); }
  header { display:flex; align-items:center; gap:16px; padding:14px 20px; border-bottom:1px solid #2a3240; }
  header h1 { font-size:18px; margin:0; }
  #status { color:var(--muted); font-size:12px; }
  #status.live::before { content:"● "; color:#5fd37a; }
  #status.down::before { content:"● "; color:var(--bad); }
  main { padding:20px; display:grid; gap:16px; grid-template-columns:repeat(auto-fill, minmax(220px, 1fr)); }
  .card { background:var(--panel); border-radius:10px; padding:14px 16px; }
  .card h2 { margin:0 0 6px; font-size:12px; font-weight:600; color:var(--muted); text-transform:uppercase; letter-spacing:.04em; }
  .value { font-size:28px; font-weight:600; font-variant-numeric:tabular-nums; }
  .sub { color:var(--muted); font-size:12px; }
  .wide { grid-column:span 2; }
  canvas { width:100%; height:90px; display:block; margin-top:8px; }
  table { width:100%; border-collapse:collapse; font-variant-numeric:tabular-nums; }
  td, th { text-align:left; padding:4px 0; border-bottom:1px solid #2a3240; }
  th { color:var(--muted); font-weight:500; font-size:12px; }
  td.num { text-align:right; }
  #login { max-width:360px; margin:80px auto; background:var(--panel); padding:24px; border-radius:10px; }
  #login input { width:100%; padding:8px; margin:8px 0 12px; border-radius:6px; border:1px solid #3a4454; background:#0f1419; color:var(--text); }
  #login button { padding:8px 16px; border:0; border-radius:6px; background:var(--accent); color:#001; font-weight:600; cursor:pointer; }
  #login .error { color:var(--bad); min-height:1.4em; }
  .hidden { display:none !important; }
</style>
</head>
<body>
<form id="login" class="hidden" autocomplete="off">
  <h1>Relay dashboard</h1>
  <label for="key">Admin key</label>
  <input id="key" type="password" required>
  <div class="error" id="login-error"></div>
  <button type="submit">Open</button>
</form>
<div id="app" class="hidden">
  <header><h1>Relay</h1><span id="status">connecting…</span><span class="sub" id="version"></span>
    <span style="flex:1"></span><button id="logout" style="background:none;border:1px solid #3a4454;color:var(--muted);border-radius:6px;padding:4px 10px;cursor:pointer">Forget key</button></header>
  <main>
    <div class="card"><h2>Connections</h2><div class="value" id="connections">–</div><div class="sub"><span id="users">–</span> users · <span id="tcp">–</span> TCP</div><canvas id="chart-connections"></canvas></div>
    <div class="card"><h2>Rooms</h2><div class="value" id="rooms">–</div><div class="sub">with at least one member</div></div>
    <div class="card"><h2>Events in /s</h2><div class="value" id="events-in-rate">–</div><canvas id="chart-in"></canvas></div>
    <div class="card"><h2>Events out /s</h2><div class="value" id="events-out-rate">–</div><canvas id="chart-out"></canvas></div>
    <div class="card"><h2>Fan-out latency</h2><div class="value"><span id="latency-p99">–</span><span class="sub"> ms p99</span></div><div class="sub">p50 <span id="latency-p50">–</span> ms</div><canvas id="chart-latency"></canvas></div>
    <div class="card"><h2>Drops</h2><div class="value" id="drops">–</div><div class="sub">coalesced <span id="coalesced">–</span> · slow-consumer closes <span id="slow-closes">–</span></div></div>
    <div class="card"><h2>Receipt commit</h2><div class="value"><span id="receipt-p99">–</span><span class="sub"> ms p99</span></div><div class="sub">p50 <span id="receipt-p50">–</span> ms · <span id="receipts">–</span> stored</div></div>
    <div class="card"><h2>Process</h2><div class="value" id="rss">–</div><div class="sub">RSS · loop lag p99 <span id="lag">–</span> ms · up <span id="uptime">–</span></div></div>
    <div class="card wide"><h2>Busiest rooms</h2><table><thead><tr><th>Room</th><th class="num">Sockets</th><th class="num">Users</th></tr></thead><tbody id="busiest"></tbody></table></div>
  </main>
  <div class="sub" style="padding:0 20px 20px">Last update <span id="updated">never</span></div>
</div>
<script>
"use strict";
const KEY = "relay.adminKey";
const $ = (id) => document.getElementById(id);
const series = { connections: [], in: [], out: [], latency: [] };
let previous = null, controller = null;

function fmt(n) { return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"); }
function fmtBytes(b) { if (b == null) return "–"; const u = ["B","KiB","MiB","GiB"]; let i = 0; while (b >= 1024 && i < 3) { b /= 1024; i++; } return b.toFixed(1) + " " + u[i]; }
function push(name, v) { const s = series[name]; s.push(v); if (s.length > 60) s.shift(); }

function draw(id, data, color) {
  const c = $(id); if (!c) return;
  const dpr = window.devicePixelRatio || 1, w = c.clientWidth, h = c.clientHeight;
  c.width = w * dpr; c.height = h * dpr;
  const g = c.getContext("2d"); g.scale(dpr, dpr); g.clearRect(0, 0, w, h);
  if (data.length < 2) return;
  const max = Math.max(1, ...data);
  g.strokeStyle = color; g.lineWidth = 2; g.beginPath();
  data.forEach((v, i) => { const x = i * w / 59, y = h - 4 - (v / max) * (h - 8); i ? g.lineTo(x, y) : g.moveTo(x, y); });
  g.stroke();
}

function render(s) {
  $("connections").textContent = fmt(s.connections);
  $("users").textContent = fmt(s.users);
  $("tcp").textContent = fmt(s.tcpConnections);
  $("rooms").textContent = fmt(s.rooms);
  $("version").textContent = "v" + s.version;
  let inRate = 0, outRate = 0;
  if (previous) {
    const dt = Math.max(0.001, (s.timeMs - previous.timeMs) / 1000);
    inRate = Math.max(0, (s.eventsIn - previous.eventsIn) / dt);
    outRate = Math.max(0, (s.eventsOut - previous.eventsOut) / dt);
  }
  previous = s;
  $("events-in-rate").textContent = fmt(Math.round(inRate));
  $("events-out-rate").textContent = fmt(Math.round(outRate));
  $("latency-p50").textContent = s.fanoutLatencyMs.p50 ?? "–";
  $("latency-p99").textContent = s.fanoutLatencyMs.p99 ?? "–";
  $("drops").textContent = fmt(s.dropped);
  $("coalesced").textContent = fmt(s.coalesced);
  $("slow-closes").textContent = fmt(s.slowConsumerCloses);
  $("receipt-p50").textContent = s.receiptCommitMs.p50 ?? "–";
  $("receipt-p99").textContent = s.receiptCommitMs.p99 ?? "–";
  $("receipts").textContent = fmt(s.receiptsStored);
  $("rss").textContent = fmtBytes(s.rssBytes);
  $("lag").textContent = s.eventLoopLagMs.p99 ?? "–";
  $("uptime").textContent = s.uptimeSeconds + " s";
  const body = $("busiest"); body.textContent = "";
  for (const r of s.busiestRooms) {
    const tr = document.createElement("tr");
    for (const [v, cls] of [[r.room, ""], [fmt(r.members), "num"], [fmt(r.users), "num"]]) {
      const td = document.createElement("td"); td.textContent = v; if (cls) td.className = cls; tr.appendChild(td);
    }
    body.appendChild(tr);
  }
  push("connections", s.connections); push("in", inRate); push("out", outRate); push("latency", s.fanoutLatencyMs.p99 || 0);
  draw("chart-connections", series.connections, "#4fb3ff");
  draw("chart-in", series.in, "#5fd37a");
  draw("chart-out", series.out, "#c792ea");
  draw("chart-latency", series.latency, "#ffb347");
  $("updated").textContent = new Date(s.timeMs).toLocaleTimeString();
  document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
}

function showLogin(message) {
  if (controller) controller.abort();
  $("app").classList.add("hidden"); $("login").classList.remove("hidden");
  $("login-error").textContent = message || ""; $("key").focus();
}

async function stream(key) {
  $("login").classList.add("hidden"); $("app").classList.remove("hidden");
  controller = new AbortController();
  try {
    const res = await fetch("/admin/v1/stream", { headers: { Authorization: "Bearer " + key }, signal: controller.signal, cache: "no-store" });
    if (res.status === 401) { sessionStorage.removeItem(KEY); return showLogin("Wrong admin key."); }
    if (!res.ok) throw new Error("HTTP " + res.status);
    $("status").textContent = "live"; $("status").className = "live";
    const reader = res.body.getReader(), decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
        const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
        if (data) render(JSON.parse(data));
      }
    }
    throw new Error("stream ended");
  } catch (e) {
    if (e.name === "AbortError") return;
    $("status").textContent = "reconnecting (" + e.message + ")"; $("status").className = "down";
    setTimeout(() => { const k = sessionStorage.getItem(KEY); if (k) stream(k); }, 2000);
  }
}

$("login").addEventListener("submit", (e) => {
  e.preventDefault();
  const key = $("key").value.trim(); $("key").value = "";
  if (!key) return;
  sessionStorage.setItem(KEY, key);
  stream(key);
});
$("logout").addEventListener("click", () => { sessionStorage.removeItem(KEY); showLogin(); });
const saved = sessionStorage.getItem(KEY);
if (saved) stream(saved); else showLogin();
</script>
</body>
</html>
"""#
}
