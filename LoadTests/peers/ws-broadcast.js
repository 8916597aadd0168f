// The peer a user would deploy instead: a plain Node `ws` room-broadcast server.
// {"join":"room"} joins a room; any other message is sent as is to the room's other members.
// Usage: node ws-broadcast.js PORT   (listens on 127.0.0.1 only)
const { WebSocketServer } = require('ws');
const rooms = new Map();
const wss = new WebSocketServer({ host: '127.0.0.1', port: Number(process.argv[2] || 8081), perMessageDeflate: false });
wss.on('connection', (ws) => {
  ws.on('message', (data) => {
    const text = data.toString();
    const msg = JSON.parse(text);
    if (msg.join) {
      ws.room = msg.join;
      if (!rooms.has(ws.room)) rooms.set(ws.room, new Set());
      rooms.get(ws.room).add(ws);
      return;
    }
    for (const peer of rooms.get(msg.room) || []) if (peer !== ws) peer.send(text);
  });
  ws.on('close', () => { if (ws.room) rooms.get(ws.room).delete(ws); });
});
wss.on('listening', () => console.log(`ws listening on 127.0.0.1:${wss.address().port}`));
