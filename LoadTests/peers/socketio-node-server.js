// The peer a Node user would deploy instead: Node's own socket.io 4.8 server, serving the same
// room fan-out as the benchmark (a port of socketio_server.py).
//   room:join {room}        -> joins the room, acks {ok: true, room}
//   bench:msg {room, ...}   -> sent as is to the room's other members (not the sender)
// WebSocket transport only, no client bundle served, otherwise socket.io's defaults.
//
// Usage: NODE_PATH=<dir holding socket.io's node_modules> node socketio-node-server.js PORT
//        (listens on 127.0.0.1 only). docs/BENCHMARKS.md says how that socket.io was built.
"use strict";
const http = require("http");
const { Server } = require("socket.io");

const port = Number(process.argv[2] || 8083);
const httpServer = http.createServer();
const io = new Server(httpServer, { transports: ["websocket"], serveClient: false });

const roomOf = (data) => (data && typeof data.room === "string" ? data.room : null);

io.on("connection", (socket) => {
  socket.on("room:join", (data, ack) => {
    const room = roomOf(data);
    if (room === null) return typeof ack === "function" && ack({ ok: false, error: "room required" });
    socket.join(room);
    if (typeof ack === "function") ack({ ok: true, room });
  });

  socket.on("bench:msg", (data) => {
    const room = roomOf(data);
    if (room !== null) socket.to(room).emit("bench:msg", data);
  });
});

httpServer.listen(port, "127.0.0.1", () => {
  console.log(`socket.io listening on 127.0.0.1:${httpServer.address().port}`);
});

// bench-compare.sh stops its peers with SIGTERM.
process.on("SIGTERM", () => {
  io.close();
  process.exit(0);
});
