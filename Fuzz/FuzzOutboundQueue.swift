// libFuzzer target: OutboundQueue<Int> against a plain-array reference model.
//
// Input layout: byte 0 → soft limit (0...127 bytes), byte 1 → hard limit (soft + 0...127),
// byte 2 → max count (1...32); then a stream of operations, one opcode byte each:
//   opcode % 4 == 0 or 1  enqueue; the next byte is the message size (0...95), and
//                         (opcode >> 2) % 5 picks a coalescing key (0...3) or none (4)
//   opcode % 4 == 2       dequeue
//   opcode % 4 == 3       removeAll, or a dequeue when (opcode >> 2) is odd (so that long
//                         runs without a reset, which exercise the queue's compaction, are common)
// Each enqueued element is a fresh sequence number, so FIFO order is checked exactly.
//
// The model follows the type's doc comment:
//   - a message with a key, when queuedBytes + bytes > softLimit and a message with that key
//     is still queued, replaces that message in place (latest wins, keeps its place in line);
//     the replacement is `.overflow` (nothing changes) if the new total would exceed the hard
//     limit. When several messages with the key are queued (they were enqueued under the soft
//     limit), the most recently enqueued one is the one replaced: it is the one whose newer
//     state must end up last in line.
//   - otherwise `.overflow` when queuedBytes + bytes > hardLimit or count == maxCount, else the
//     message is appended (`.queued`).
// After every operation count, queuedBytes and isEmpty must match; at the end the queue is
// drained and must yield exactly the model's elements in order.

private typealias Queue = OutboundQueue<Int>

private let keys: [CoalescingKey] = [
    .init(event: "typing:start", room: "r1", user: "u1"),
    .init(event: "typing:start", room: "r1", user: "u2"),
    .init(event: "typing:start", room: "r2", user: "u1"),
    .init(event: "location:update", room: "r1", user: "u1"),
]

private struct Model {
    struct Entry { var element: Int; var bytes: Int; var key: CoalescingKey? }
    let soft: Int, hard: Int, maxCount: Int
    var entries: [Entry] = []
    var queuedBytes = 0

    mutating func enqueue(_ element: Int, bytes: Int, key: CoalescingKey?) -> Queue.EnqueueResult {
        if let key, queuedBytes + bytes > soft, let index = entries.lastIndex(where: { $0.key == key }) {
            let total = queuedBytes - entries[index].bytes + bytes
            guard total <= hard else { return .overflow }
            entries[index] = Entry(element: element, bytes: bytes, key: key)
            queuedBytes = total
            return .replaced
        }
        guard queuedBytes + bytes <= hard, entries.count < maxCount else { return .overflow }
        entries.append(Entry(element: element, bytes: bytes, key: key))
        queuedBytes += bytes
        return .queued
    }

    mutating func dequeue() -> Int? {
        guard !entries.isEmpty else { return nil }
        let entry = entries.removeFirst()
        queuedBytes -= entry.bytes
        return entry.element
    }

    mutating func removeAll() {
        entries.removeAll()
        queuedBytes = 0
    }
}

/// One executed operation, kept cheaply and only formatted when a check fails.
private enum Step: CustomStringConvertible {
    case enqueue(element: Int, bytes: Int, key: Int?, result: Queue.EnqueueResult)
    case dequeue(Int?)
    case removeAll

    var description: String {
        switch self {
        case let .enqueue(element, bytes, key, result):
            return "enqueue(\(element), bytes: \(bytes), key: \(key.map(String.init) ?? "nil")) -> \(result)"
        case .dequeue(let element): return "dequeue() -> \(element.map(String.init) ?? "nil")"
        case .removeAll: return "removeAll()"
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = UnsafeBufferPointer(start: data, count: size)
    guard input.count >= 3 else { return 0 }
    let soft = Int(input[0] % 128)
    let hard = soft + Int(input[1] % 128)
    let maxCount = 1 + Int(input[2] % 32)
    var queue = Queue(softLimitBytes: soft, hardLimitBytes: hard, maxCount: maxCount)
    var model = Model(soft: soft, hard: hard, maxCount: maxCount)
    var trace: [Step] = []  // for the failure message
    var next = 0
    var i = 3

    func fail(_ what: String) -> Never {
        fatalError("OutboundQueue(soft: \(soft), hard: \(hard), maxCount: \(maxCount)): \(what)\nafter: \(trace.suffix(40).map(\.description).joined(separator: "; "))")
    }

    while i < input.count {
        let op = input[i]
        i += 1
        switch op % 4 {
        case 0, 1:
            guard i < input.count else { break }
            let bytes = Int(input[i] % 96)
            i += 1
            let k = Int(op >> 2) % 5
            let key = k < keys.count ? keys[k] : nil
            next += 1
            let got = queue.enqueue(next, bytes: bytes, key: key)
            let want = model.enqueue(next, bytes: bytes, key: key)
            trace.append(.enqueue(element: next, bytes: bytes, key: k < keys.count ? k : nil, result: got))
            guard got == want else { fail("enqueue returned \(got), model \(want)") }
        case 2:
            let got = queue.dequeue()
            let want = model.dequeue()
            trace.append(.dequeue(got))
            guard got == want else { fail("dequeue returned \(String(describing: got)), model \(String(describing: want))") }
        default:
            if (op >> 2) & 1 == 1 {
                let got = queue.dequeue()
                let want = model.dequeue()
                trace.append(.dequeue(got))
                guard got == want else { fail("dequeue returned \(String(describing: got)), model \(String(describing: want))") }
            } else {
                queue.removeAll()
                model.removeAll()
                trace.append(.removeAll)
            }
        }
        guard queue.count == model.entries.count else { fail("count \(queue.count), model \(model.entries.count)") }
        guard queue.queuedBytes == model.queuedBytes else { fail("queuedBytes \(queue.queuedBytes), model \(model.queuedBytes)") }
        guard queue.isEmpty == model.entries.isEmpty else { fail("isEmpty \(queue.isEmpty)") }
        guard queue.queuedBytes <= hard, queue.count <= maxCount else { fail("limits exceeded: \(queue.queuedBytes) bytes, \(queue.count) messages") }
    }

    guard model.queuedBytes == model.entries.reduce(0, { $0 + $1.bytes }) else { fail("harness: model byte count drifted") }
    // Drain: exact FIFO order of what the model holds, then empty.
    while let want = model.dequeue() {
        guard let got = queue.dequeue(), got == want else { fail("drain: expected \(want)") }
    }
    guard queue.dequeue() == nil, queue.count == 0, queue.queuedBytes == 0 else { fail("not empty after draining") }
    return 0
}
