#!/usr/bin/env python3
"""categorize.py: the relay's live heap per idle socket, by category (NIO channel, pipeline
handlers, Relay's session objects, hub tables, …), from heaptrack's leaked-at-kill data: heapkill.sh
SIGKILLs the relay while N idle authenticated sockets are held (TAG), and the same with 1 socket
(BASE); the difference divided by N - 1 is per socket. Bytes are exact (flamegraph 'leaked'
stacks), allocation counts from heaptrack_print -l (leaks.py). A stack goes to the category of
its innermost frame that names one (regex matched from that frame outwards).

Usage: categorize.py TAG BASE N
  TAG, BASE: heapkill.sh's directories, each holding leaked-stacks.txt and leaks.txt.json
  (see README.md); a path to a directory, or a tag meaning $OUT_ROOT/heap-TAG
  (OUT_ROOT default /tmp/relay-memory). N: the sockets TAG held (> 1).

Prints a markdown table (category | bytes | allocations | + glibc chunk overhead, per socket),
its totals, and the live heap per socket with glibc's chunk overhead.
"""
import json, os, re, sys, subprocess, collections
if len(sys.argv) != 4 or not sys.argv[3].isdigit() or int(sys.argv[3]) < 2:
    sys.exit(__doc__.split('\n\n')[1].strip())
tag, base, N = sys.argv[1], sys.argv[2], int(sys.argv[3])
def heap_dir(t):  # a directory, or a tag under OUT_ROOT
    return t if os.path.isdir(t) else os.path.join(os.environ.get('OUT_ROOT', '/tmp/relay-memory'), f'heap-{t}')
CATS = [
 ("NIO: SocketChannel object", r"SocketChannel\.__allocating_init"),
 ("NIO: channel's own parts (pipeline, close promise, description, atomics, socket, addresses)", r"(specialized )?BaseSocketChannel\.init|Socket\.__allocating_init|SocketAddress"),
 ("NIO: pending-writes manager (+ its 16-slot ring)", r"PendingStreamWritesManager|PendingStreamWritesState"),
 ("NIO: pipeline contexts", r"ChannelHandlerContext\.__allocating_init"),
 ("NIO: kept receive buffer (+ allocator box)", r"(closure #1 in )?BaseStreamSocketChannel\.readFromSocket|NIOPooledRecvBufferAllocator"),
 ("NIO: selector registration table", r"(specialized )?(closure #1 in )?Selector\.register"),
 ("NIO: timer queue and scheduled tasks", r"(specialized )?PriorityQueue\.push|SelectableEventLoop\._prepareToSchedule|SelectableEventLoop\.scheduleTask|SessionTimer\.set"),
 ("NIO: ByteToMessageHandler + WebSocketFrameDecoder", r"(specialized )?ByteToMessageHandler|B2MDBuffer|WebSocketFrameDecoder\.__allocating_init <- (?!WebSocketFrameCodec)"),
 ("NIO: WebSocketFrameEncoder (+ header buffer)", r"WebSocketFrameEncoder"),
 ("Relay: TextUTF8Guard (+ validator array)", r"TextUTF8Guard"),
 ("Relay: WebSocketFrameCodec (+ validator array, NIO decoder)", r"WebSocketFrameCodec"),
 ("Relay: WebSocketTransport", r"WebSocketTransport\.__allocating_init"),
 ("Relay: ClientSession (EngineSession, ConnectState inline)", r"ClientSession\.__allocating_init"),
 ("Relay: CONNECT answer kept", r"EngineSession\.connectFinished"),
 ("Relay: ConnectionAdmission (+ close callback)", r"ConnectionAdmission|(specialized )?EventLoopFuture(\.Isolated)?\.whenComplete <- (specialized )?static RelayServer\.configure"),
 ("Relay: token's room patterns", r"RoomAuthorization"),
 ("Relay: hub tables (registry, directory, loop partition, admission)", r"ConnectionRegistry|ConnectionDirectory|PartitionMembership|LoopPartition|AdmissionControl|ConnectionMap"),
 ("Swift concurrency, dispatch (the token check's task)", r"_dispatch_|swift_task|Task<>"),
]
def cat(frames):  # leaf first
    for i in range(len(frames)):
        rest = ' <- '.join(frames[i:])
        for name, rx in CATS:
            if re.match(rx, rest): return name
    return "other"
def clean(f): return re.sub(r'\(.*', '', f).strip()
def demangle(syms):
    out = subprocess.run(['swift', 'demangle', '--simplified', '--compact'], input='\n'.join(syms), capture_output=True, text=True).stdout.split('\n')
    return dict(zip(syms, out))
def bytes_by_cat(t):
    rows, syms = [], set()
    for l in open(os.path.join(heap_dir(t), 'leaked-stacks.txt')).read().splitlines():
        stack, n = l.rsplit(' ', 1)
        frames = [re.sub(r' \([^()]*\)$', '', f) for f in stack.split(';')]
        rows.append((frames, int(n))); syms.update(frames)
    d = demangle(sorted(syms)); agg = collections.Counter()
    for frames, n in rows: agg[cat([clean(d.get(f, f)) for f in reversed(frames)])] += n
    return agg
def counts_by_cat(t):
    agg = collections.Counter(); sizes = collections.defaultdict(list)
    for b in json.load(open(os.path.join(heap_dir(t), 'leaks.txt.json'))):
        c = cat([clean(f) for f in b['frames']]); agg[c] += b['calls']; sizes[c].append((b['bytes'], b['calls']))
    return agg, sizes
def overhead(sizes):  # glibc: a chunk is the request + 8, rounded up to 16, at least 32
    o = 0
    for by, calls in sizes:
        if calls: avg = by / calls; o += (max(32, (avg + 8 + 15) // 16 * 16) - avg) * calls
    return o
B, Bb = bytes_by_cat(tag), bytes_by_cat(base)
(C, S), (Cb, Sb) = counts_by_cat(tag), counts_by_cat(base)
tot = [0, 0, 0]
print("| where | bytes | allocations | + glibc chunk overhead |\n| --- | ---: | ---: | ---: |")
for name, _ in CATS + [("other", None)]:
    by = (B[name] - Bb[name]) / (N - 1); n = (C[name] - Cb[name]) / (N - 1); ov = (overhead(S[name]) - overhead(Sb[name])) / (N - 1)
    if abs(by) < 0.5 and abs(n) < 0.005: continue
    tot[0] += by; tot[1] += n; tot[2] += ov
    print(f"| {name} | {by:.0f} | {n:.2f} | {ov:.0f} |")
print(f"| **per socket** | **{tot[0]:.0f}** | **{tot[1]:.1f}** | **{tot[2]:.0f}** |")
print(f"\nlive heap per socket with glibc's chunk overhead: {tot[0]+tot[2]:.0f} B = {(tot[0]+tot[2])/1024:.2f} KiB")
