// Relay's chat behaviour for `relay-load chat` (issue #32), written as an app on Node's
// socket.io 4.8 (websocket transport only), so the three servers can be compared on the same wire.
//
// What it does, as Relay does for this scenario (docs/PROTOCOL.md §2–§4, §12 "Rooms in CONNECT"):
// - CONNECT: verifies the HS256 token (signature, `exp` with 30 s leeway), takes the user from
//   `sub`, joins the rooms listed in the CONNECT auth that the token's `rooms` claim allows
//   (exact names or `prefix*`); the others are left out.
// - `room:join {room}` with an ack, for clients that join one room at a time.
// - Any other `entity:action` event with a `room` the socket is in (`chat:message`): stamped
//   with `from` and `ts`, sent to the room except the sending socket, acked `{"ok":true}`.
// - `typing:start` / `typing:stop {room}`: `{room, from, ts}` to the room except every socket of
//   the typing user. Not coalesced (Relay sends one flush per room per 100 ms).
// - `message:delivered` / `message:read` `{room, items:[{messageId, authorId}…]}` (or one
//   `messageId`/`authorId`): idempotent per (messageId, user, kind), **kept in memory only** (a
//   Map that grows for the life of the process; Relay commits them to SQLite before it acks),
//   acked with each item's cursor, new ones forwarded as one `{room, from, kind, items}` event
//   to the room except the sending socket.
// - Presence: `presence:join` / `presence:leave {room, user, from, ts}` to the user's rooms on
//   the user's first connect / last disconnect.
// No rate limits, no history, no recovery, no backpressure limits beyond the libraries'.
//
// Relay's #42 semantics, so both servers can be given the same (both off by default, as before):
// - RECEIPT_AUDIENCE=devices (Relay `--receipt-audience delivered=devices,read=devices`): a new
//   receipt goes to each author's devices (the items of its messages) and the reader's other
//   devices (all items), each only if its token allows the room; the other members get nothing.
// - PRESENCE_GRACE_MS=N (Relay `--presence-grace-ms N`): a user whose last socket drops and who
//   is back within N ms causes no `presence:leave`/`presence:join`; otherwise the leave is sent
//   at the deadline.
//
// Usage: RELAY_JWT_SECRET=… NODE_PATH=/path/to/node_modules node chat-socketio-node-server.js PORT
//        (listens on 127.0.0.1 only)
'use strict';
const crypto = require('crypto');
const http = require('http');
const { Server } = require('socket.io');

const SECRET = process.env.RELAY_JWT_SECRET || '';
if (Buffer.byteLength(SECRET) < 32) {
  console.error('RELAY_JWT_SECRET (at least 32 bytes) must be set');
  process.exit(2);
}
const port = Number(process.argv[2] || 8085);
const AUDIENCE = process.env.RECEIPT_AUDIENCE || 'room';
const GRACE_MS = Number(process.env.PRESENCE_GRACE_MS || 0);
if (AUDIENCE !== 'room' && AUDIENCE !== 'devices') {
  console.error('RECEIPT_AUDIENCE must be room or devices');
  process.exit(2);
}
const departing = new Map(); // user -> {rooms, timer}: last socket dropped, inside the grace

const devices = new Map(); // user -> Set of socket ids
const receipts = new Map(); // `${messageId}\0${user}\0${kind}` -> cursor
let nextCursor = 1;

function verify(token) {
  if (typeof token !== 'string') return null;
  const parts = token.split('.');
  if (parts.length !== 3) return null;
  try {
    if (JSON.parse(Buffer.from(parts[0], 'base64url')).alg !== 'HS256') return null;
    const expected = crypto.createHmac('sha256', SECRET).update(`${parts[0]}.${parts[1]}`).digest();
    const sig = Buffer.from(parts[2], 'base64url');
    if (sig.length !== expected.length || !crypto.timingSafeEqual(sig, expected)) return null;
    const claims = JSON.parse(Buffer.from(parts[1], 'base64url'));
    if (typeof claims.sub !== 'string' || typeof claims.exp !== 'number') return null;
    if (claims.exp + 30 < Date.now() / 1000) return null;
    return claims;
  } catch {
    return null;
  }
}

function allowedRooms(claims) {
  const patterns = (Array.isArray(claims.rooms) ? claims.rooms : []).filter((p) => typeof p === 'string' && p);
  return {
    exact: new Set(patterns.filter((p) => !p.endsWith('*'))),
    prefixes: patterns.filter((p) => p.endsWith('*')).map((p) => p.slice(0, -1)),
  };
}

function allows(allowed, room) {
  return typeof room === 'string' && (allowed.exact.has(room) || allowed.prefixes.some((p) => room.startsWith(p)));
}

const error = (code) => ({ ok: false, error: { code, message: code } });
const reply = (ack, value) => { if (typeof ack === 'function') ack(value); };

const httpServer = http.createServer();
const io = new Server(httpServer, { transports: ['websocket'], serveClient: false });

io.use((socket, next) => {
  const auth = socket.handshake.auth || {};
  const claims = verify(auth.token);
  if (!claims) return next(new Error('token_invalid'));
  socket.data.user = claims.sub;
  socket.data.allowed = allowedRooms(claims);
  next();
});

io.on('connection', (socket) => {
  const { user, allowed } = socket.data;
  const asked = Array.isArray(socket.handshake.auth.rooms) ? socket.handshake.auth.rooms.slice(0, 100) : [];
  const rooms = new Set(asked.filter((r) => allows(allowed, r)));
  socket.data.rooms = rooms;
  let sids = devices.get(user);
  const first = !sids;
  if (first) devices.set(user, (sids = new Set()));
  sids.add(socket.id);
  const ts = Date.now();
  // Back within the grace: the rooms still held say nothing; the others are left now.
  const held = first ? departing.get(user) : undefined;
  if (held) {
    clearTimeout(held.timer);
    departing.delete(user);
    for (const room of held.rooms) if (!rooms.has(room)) io.to(room).emit('presence:leave', { room, user, from: user, ts });
  }
  for (const room of rooms) if (first && !(held && held.rooms.has(room))) io.to(room).emit('presence:join', { room, user, from: user, ts });
  socket.join([...rooms]);

  const memberRoom = (data) => (data && typeof data === 'object' && rooms.has(data.room) ? data.room : null);

  socket.on('disconnect', () => {
    sids.delete(socket.id);
    if (sids.size > 0) return;
    devices.delete(user);
    const leave = () => {
      const ts = Date.now();
      for (const room of rooms) io.to(room).emit('presence:leave', { room, user, from: user, ts });
    };
    if (GRACE_MS <= 0) return leave();
    const timer = setTimeout(() => {
      departing.delete(user);
      leave();
    }, GRACE_MS);
    departing.set(user, { rooms, timer });
  });

  socket.on('room:join', (data, ack) => {
    const room = data && data.room;
    if (!allows(allowed, room)) return reply(ack, error('room_not_authorized'));
    if (!rooms.has(room)) {
      const present = [...sids].some((id) => id !== socket.id && io.sockets.sockets.get(id)?.data.rooms.has(room));
      if (!present) io.to(room).emit('presence:join', { room, user, from: user, ts: Date.now() });
      rooms.add(room);
      socket.join(room);
    }
    reply(ack, { ok: true, room });
  });

  for (const event of ['typing:start', 'typing:stop']) {
    socket.on(event, (data, ack) => {
      const room = memberRoom(data);
      if (!room) return reply(ack, error('not_in_room'));
      io.to(room).except([...sids]).emit(event, { room, from: user, ts: Date.now() });
      reply(ack, { ok: true });
    });
  }

  for (const kind of ['delivered', 'read']) {
    socket.on(`message:${kind}`, (data, ack) => {
      const room = memberRoom(data);
      if (!room) return reply(ack, error('not_in_room'));
      const single = !('items' in data);
      const items = single ? [{ messageId: data.messageId, authorId: data.authorId }] : data.items;
      if (!Array.isArray(items) || items.length < 1 || items.length > 100) return reply(ack, error('invalid_payload'));
      const ts = Date.now();
      const acked = [];
      const fresh = [];
      const seen = new Set();
      for (const item of items) {
        const messageId = item && item.messageId;
        const authorId = item && item.authorId;
        if (typeof messageId !== 'string' || typeof authorId !== 'string' || !messageId || !authorId) return reply(ack, error('invalid_payload'));
        if (seen.has(messageId)) continue;
        seen.add(messageId);
        const key = `${messageId}\0${user}\0${kind}`;
        let id = receipts.get(key);
        if (id === undefined) {
          id = nextCursor++;
          receipts.set(key, id);
          fresh.push({ id, room, messageId, authorId, userId: user, kind, ts });
        }
        acked.push({ messageId, id });
      }
      if (fresh.length) forward(kind, room, fresh);
      reply(ack, single ? { ok: true, id: acked[0].id } : { ok: true, items: acked });
    });
  }

  // A new receipt batch to its audience (see RECEIPT_AUDIENCE above).
  function forward(kind, room, fresh) {
    const event = `message:${kind}`;
    if (AUDIENCE === 'room') return socket.to(room).emit(event, { room, from: user, kind, items: fresh });
    const mayAccess = (id) => {
      const other = io.sockets.sockets.get(id);
      return id !== socket.id && other !== undefined && allows(other.data.allowed, room);
    };
    const byAuthor = new Map();
    for (const r of fresh) {
      if (!byAuthor.has(r.authorId)) byAuthor.set(r.authorId, []);
      byAuthor.get(r.authorId).push(r);
    }
    for (const [author, items] of byAuthor) {
      const targets = [...(devices.get(author) || [])].filter(mayAccess);
      if (targets.length) io.to(targets).emit(event, { room, from: user, kind, items });
    }
    const mine = [...sids].filter(mayAccess);
    if (mine.length) io.to(mine).emit(event, { room, from: user, kind, items: fresh });
  }

  // Any other event (the chat messages): to the room but the sender.
  const known = new Set(['room:join', 'typing:start', 'typing:stop', 'message:delivered', 'message:read']);
  socket.onAny((event, data, ack) => {
    if (known.has(event)) return;
    const room = memberRoom(data);
    if (!room) return reply(ack, error('not_in_room'));
    data.from = user;
    data.ts = Date.now();
    socket.to(room).emit(event, data);
    reply(ack, { ok: true });
  });
});

httpServer.listen(port, '127.0.0.1', () => console.log(`socket.io chat listening on 127.0.0.1:${port}`));
