"""The other peer a user would deploy instead: a python-socketio server on uvicorn (uvloop),
its fastest supported async server, serving the same room fan-out as the benchmark.

Usage: python socketio_server.py PORT   (listens on 127.0.0.1 only)
"""
import sys

import socketio
import uvicorn

sio = socketio.AsyncServer(async_mode="asgi", transports=["websocket"], cors_allowed_origins=[])
app = socketio.ASGIApp(sio)


@sio.event
async def connect(sid, environ, auth):
    return True


@sio.on("room:join")
async def join(sid, data):
    await sio.enter_room(sid, data["room"])
    return {"ok": True, "room": data["room"]}


@sio.on("bench:msg")
async def bench(sid, data):
    await sio.emit("bench:msg", data, room=data["room"], skip_sid=sid)


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8082
    print(f"python-socketio listening on 127.0.0.1:{port}", flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", loop="uvloop", ws="websockets")
