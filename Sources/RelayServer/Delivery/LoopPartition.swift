import NIOConcurrencyHelpers
import NIOCore
import RelayBackends
import RelayCore
import RelayLocks

/// The connections that live on one event loop and their local room and user membership.
///
/// Confined to its loop: every method must be called on `eventLoop`. Fan-out reaches a partition
/// with one hop per event and delivers to all its local recipients from there.
/// (`@unchecked Sendable`: its mutable state is only touched on `eventLoop`, which every method
/// that touches it checks with `preconditionInEventLoop`; the inbox has its own lock.)
public final class LoopPartition: @unchecked Sendable {
    public let index: Int
    public let eventLoop: any EventLoop
    private var membership = PartitionMembership()
    private var codecs = PartitionCodecs()

    /// Decompresses this loop's permessage-deflate messages.
    var inflater: MessageInflater { codecs.inflater }

    /// A deflater for clients that limited the server's window (`server_max_window_bits`).
    func deflater(windowBits: Int) -> MessageDeflater {
        eventLoop.preconditionInEventLoop()
        return codecs.deflater(windowBits: windowBits)
    }

    let metrics: RelayMetrics
    /// Sockets written to in this loop iteration and not flushed yet.
    private var unflushed: ContiguousArray<RoomMembers.Member> = []
    private var flushScheduled = false

    /// Flushes once per socket per loop iteration: every event a socket got while this loop
    /// drained its queue leaves in one `writev`, instead of one syscall per event. Under load
    /// that is most of the cost of a delivery; when idle it costs one task hop (microseconds).
    private func flushLater(_ member: RoomMembers.Member) {
        if flushesAtOnce { return member.sink.flushOutbound() }
        unflushed.append(member)
        // A drain flushes what it wrote when it ends: no task for that.
        guard !flushScheduled && !draining else { return }
        flushScheduled = true
        eventLoop.execute { [self] in
            self.flushScheduled = false
            self.flushUnflushed()
        }
    }

    /// Flushes every socket written to since the last flush (a socket written twice is asked
    /// twice; the second flush finds nothing pending).
    private func flushUnflushed() {
        guard !unflushed.isEmpty else { return }
        let sinks = unflushed
        unflushed.removeAll(keepingCapacity: true)
        // Written a whole batch ago: as cold as before the write.
        for i in sinks.indices {
            prefetch(ahead: i, in: sinks)
            sinks[i].sink.flushOutbound()
        }
    }

    /// Asks the CPU for what a write or flush touches, a few members ahead of `index`, in the
    /// order it is read: the session (its address is in the list), then its transport (the
    /// session has that address), then the channel's objects (the transport has theirs). Each
    /// step reads only what the step before brought in. In a large room, or after the kernel
    /// has run in between, every one of those objects is cold; asked for early, their misses
    /// overlap the current member's write instead of stalling it one after the other.
    @inline(__always)
    private func prefetch(ahead index: Int, in members: ContiguousArray<RoomMembers.Member>) {
        let count = members.count
        if index &+ 3 < count { Prefetch.lines(members[index &+ 3].address, count: 4) }
        if index &+ 2 < count { members[index &+ 2].sink.prefetchTransport() }
        if index &+ 1 < count { members[index &+ 1].sink.prefetchChannel() }
    }

    /// Deliveries posted from any thread (`post`), run in order by one task per batch.
    private let inbox = AuditedLock(PartitionInbox())
    /// The drained batch's buffer, kept between batches (loop-confined).
    private var batch: [PartitionDelivery] = []

    /// Hands a delivery to this loop: it runs after every delivery posted before it, in a batch
    /// with those posted while the drain was pending. Callable from any thread, with locks held.
    func post(_ delivery: PartitionDelivery) {
        let schedule = inbox.withLockedValue { $0.append(delivery) }
        if schedule { eventLoop.execute { [self] in drainInbox() } }
    }

    /// Set while a batch of one delivery runs: each socket is flushed right after its write.
    private var flushesAtOnce = false

    // A stamped (recoverable) event gets its offset under its stream's lock, and must reach each
    // socket after the stream's earlier events. Those may wait in this loop's inbox, so it is
    // normally posted there too, even from this loop: one more task per event. When a publish
    // on this loop finds the inbox empty and no batch running, nothing of the stream can be
    // ahead of it here: it is kept in `inline.kept` and run as soon as the broker's lock is
    // released, still before this loop runs any task posted meanwhile.
    private struct InlinePublish {
        /// Set by `beginInlinePublish` while a publish on this loop may keep its local delivery.
        var open = false
        /// The delivery kept, run by `endInlinePublish`.
        var kept: PartitionDelivery?
    }
    private var inline = InlinePublish()

    /// Opens a publish on this loop whose local delivery may run inline; pass the result to
    /// `endInlinePublish`. Called on this loop.
    func beginInlinePublish() -> Bool {
        let previous = inline.open
        inline.open = true
        return previous
    }

    /// Keeps a stamped delivery to run when the publish ends, when nothing can be ahead of it on
    /// this loop; `false` when it must be posted. Called under the stream's lock, on any thread.
    func keepInline(_ delivery: PartitionDelivery) -> Bool {
        guard eventLoop.inEventLoop, inline.open, inline.kept == nil, !draining, !flushesAtOnce else { return false }
        guard inbox.withLockedValue({ $0.count == 0 }) else { return false }
        inline.kept = delivery
        return true
    }

    /// Ends the publish `beginInlinePublish` opened and runs the delivery it kept, if any (the
    /// broker's lock is released by now).
    func endInlinePublish(_ previous: Bool) {
        inline.open = previous
        guard let delivery = inline.kept else { return }
        inline.kept = nil
        perform(delivery)
    }
    /// Set while a larger batch runs: its sockets are flushed when the batch ends.
    private var draining = false

    /// Runs the posted deliveries in order. Deliveries posted while it runs (a delivery that
    /// closes a slow socket may publish a presence change) go to the next batch.
    ///
    /// A batch that writes each socket once (moderate load: one event per iteration, or a few
    /// events to different rooms) flushes each socket right after writing it, while its
    /// channel is still in cache, instead of walking every recipient a second time. A larger
    /// batch, or one with two events for a room (a burst), writes everything first so that
    /// each socket's events leave in one `writev`, then flushes those sockets when the batch
    /// ends, in the same task (no second task walks them later).
    private func drainInbox() {
        eventLoop.preconditionInEventLoop()
        var batch = self.batch
        self.batch = []
        inbox.withLockedValue { $0.take(into: &batch) }
        if unflushed.isEmpty && Self.writesEachSocketOnce(batch) {
            flushesAtOnce = true
            for delivery in batch { perform(delivery) }
            flushesAtOnce = false
        } else {
            draining = true
            for delivery in batch { perform(delivery) }
            draining = false
            flushUnflushed()
        }
        batch.removeAll(keepingCapacity: true)
        self.batch = batch
    }

    /// Whether a batch most likely writes each socket once: a few deliveries, to different
    /// rooms. Its sockets are then flushed right after their write, while their channel is in
    /// cache, instead of in a second, cold walk whose only gain is joining a socket's events
    /// into one `writev`. A socket in two of those rooms is flushed twice: one more syscall,
    /// nothing lost. A larger batch (the loop fell behind) keeps the joined flush.
    static func writesEachSocketOnce(_ batch: [PartitionDelivery]) -> Bool {
        if batch.count == 1 { return true }
        guard batch.count <= maxFlushAtOnceBatch else { return false }
        for i in batch.indices {
            guard case .room(let room, _, _, _) = batch[i] else { return false }
            for j in batch.indices where j > i {
                if case .room(let other, _, _, _) = batch[j], other == room { return false }
            }
        }
        return true
    }

    /// The largest batch whose rooms are compared for `writesEachSocketOnce` (quadratic).
    static let maxFlushAtOnceBatch = 8

    /// Runs one delivery now (on this loop).
    func perform(_ delivery: PartitionDelivery) {
        switch delivery {
        case .room(let room, let message, let excludeConnection, let excludeUser):
            deliver(room: room, message, excludeConnection: excludeConnection, excludeUser: excludeUser)
        case .user(let user, let message):
            deliver(user: user, message)
        case .userOutsideRoom(let user, let message, let room, let excludeConnection):
            deliver(user: user, message, skippingMembersOf: room, excludeConnection: excludeConnection)
        case .userAllowedIn(let user, let message, let room, let excludeConnection):
            deliver(user: user, message, allowedIn: room, excludeConnection: excludeConnection)
        }
    }

    /// Deliveries posted and not run yet (tests).
    var pendingDeliveries: Int { inbox.withLockedValue { $0.count } }

    init(index: Int, eventLoop: any EventLoop, metrics: RelayMetrics) {
        self.index = index
        self.eventLoop = eventLoop
        self.metrics = metrics
    }

    /// One metrics update per delivery call, however many sockets it reached.
    private func recordDelivery(_ message: OutboundMessage, count: Int) {
        guard count > 0 else { return }
        metrics.delivery.deliveries.increment(by: Int64(count))
        metrics.events.eventOut(label: message.label, count: count)
        if message.createdAt > 0 {
            metrics.delivery.fanoutLatency.recordNanoseconds(Int64(NIODeadline.now().uptimeNanoseconds &- message.createdAt))
        }
    }

    public var connectionCount: Int {
        eventLoop.preconditionInEventLoop()
        return membership.connections.count
    }

    func add(_ sink: any ConnectionSink, user: String) {
        eventLoop.preconditionInEventLoop()
        membership.add(sink, user: user)
    }

    func remove(_ id: ConnectionID) {
        eventLoop.preconditionInEventLoop()
        membership.remove(id)
    }

    func join(room: String, _ sink: any ConnectionSink) {
        eventLoop.preconditionInEventLoop()
        membership.join(room: room, sink)
    }

    func leave(room: String, _ id: ConnectionID) {
        eventLoop.preconditionInEventLoop()
        membership.leave(room: room, id)
    }

    /// Delivers to the local members of `room`, skipping one connection and/or one user.
    /// Returns how many sockets it wrote to.
    @discardableResult
    func deliver(room: String, _ message: OutboundMessage, excludeConnection: ConnectionID?, excludeUser: String?) -> Int {
        eventLoop.preconditionInEventLoop()
        guard let members = membership.rooms[room]?.members else { return 0 }
        let count = members.count
        var n = 0
        for i in 0..<count {
            prefetch(ahead: i, in: members)
            let member = members[i]
            if member.id == excludeConnection { continue }
            if let excludeUser, membership.userOf[member.id] == excludeUser { continue }
            member.sink.enqueue(message)
            flushLater(member)
            n += 1
        }
        recordDelivery(message, count: n)
        return n
    }

    @discardableResult
    func deliver(user: String, _ message: OutboundMessage) -> Int {
        eventLoop.preconditionInEventLoop()
        guard let sinks = membership.users[user] else { return 0 }
        sinks.forEach { _, sink in
            sink.enqueue(message)
            flushLater(RoomMembers.Member(sink))
        }
        recordDelivery(message, count: sinks.count)
        return sinks.count
    }

    /// Delivers to the user's local sockets that are not members of `room` (they got it from
    /// the room already) and whose token allows the room (a receipt never reaches a device that
    /// may not see its room, whoever the sender named as the author).
    @discardableResult
    func deliver(user: String, _ message: OutboundMessage, skippingMembersOf room: String, excludeConnection: ConnectionID?) -> Int {
        eventLoop.preconditionInEventLoop()
        guard let sinks = membership.users[user] else { return 0 }
        let members = membership.rooms[room]
        var n = 0
        sinks.forEach { id, sink in
            guard members?.contains(id) != true && id != excludeConnection && sink.mayAccess(room: room) else { return }
            sink.enqueue(message)
            flushLater(RoomMembers.Member(sink))
            n += 1
        }
        recordDelivery(message, count: n)
        return n
    }

    /// The user's sockets on this loop whose token allows `room`, members or not, but
    /// `excludeConnection`.
    @discardableResult
    func deliver(user: String, _ message: OutboundMessage, allowedIn room: String, excludeConnection: ConnectionID?) -> Int {
        eventLoop.preconditionInEventLoop()
        guard let sinks = membership.users[user] else { return 0 }
        var n = 0
        sinks.forEach { id, sink in
            guard id != excludeConnection && sink.mayAccess(room: room) else { return }
            sink.enqueue(message)
            flushLater(RoomMembers.Member(sink))
            n += 1
        }
        recordDelivery(message, count: n)
        return n
    }

    /// Closes every local socket of `user`.
    func close(user: String, code: UInt16, reason: String) {
        eventLoop.preconditionInEventLoop()
        for sink in (membership.users[user] ?? ConnectionMap()).values { sink.close(code: code, reason: reason) }
    }

    func sink(_ id: ConnectionID) -> (any ConnectionSink)? {
        eventLoop.preconditionInEventLoop()
        return membership.connections[id]
    }

    /// Every local connection (for shutdown and admin).
    func allSinks() -> [any ConnectionSink] {
        eventLoop.preconditionInEventLoop()
        return Array(membership.connections.values)
    }
}
