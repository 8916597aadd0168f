/// Coalesces `typing:start`/`typing:stop` per room.
///
/// The first change in a quiet room opens a window of `window` ms; when it closes, one flush
/// carries the *net* changes since the last flush: a start and a stop inside one window cancel,
/// repeated starts collapse into one. A start not refreshed for `expiry` ms turns into a stop,
/// and closing a connection stops the typing it started. Time is passed in (milliseconds on
/// any monotonic clock) so the type is deterministic under test.
public struct TypingDebouncer: Sendable {
    /// One net change a flush delivers to the room.
    public struct Change: Equatable, Sendable {
        public var room: String
        public var user: String
        public var isTyping: Bool
        public init(room: String, user: String, isTyping: Bool) {
            self.room = room
            self.user = user
            self.isTyping = isTyping
        }
    }

    struct Entry: Sendable {
        /// What the latest input says.
        var typing: Bool
        /// What the room was last told.
        var announced: Bool
        var refreshedAt: Int64
        var connection: ConnectionID
    }

    struct RoomState: Sendable {
        var entries: [String: Entry] = [:]
        var flushAt: Int64?
    }

    public let window: Int64
    public let expiry: Int64
    private var rooms: [String: RoomState] = [:]

    public init(windowMs: Int64, expiryMs: Int64) {
        self.window = windowMs
        self.expiry = expiryMs
    }

    /// Records a start. Returns the room's pending flush time, if a flush is pending.
    @discardableResult
    public mutating func start(room: String, user: String, connection: ConnectionID, now: Int64) -> Int64? {
        var state = rooms[room] ?? RoomState()
        var entry = state.entries[user] ?? Entry(typing: false, announced: false, refreshedAt: now, connection: connection)
        entry.typing = true
        entry.refreshedAt = now
        entry.connection = connection
        state.entries[user] = entry
        if entry.typing != entry.announced || state.flushAt != nil { openWindow(&state, now: now) }
        rooms[room] = state
        return state.flushAt
    }

    /// Records a stop. Returns the room's pending flush time, if a flush is pending.
    @discardableResult
    public mutating func stop(room: String, user: String, now: Int64) -> Int64? {
        guard var state = rooms[room], var entry = state.entries[user], entry.typing else { return rooms[room]?.flushAt }
        entry.typing = false
        state.entries[user] = entry
        openWindow(&state, now: now)
        rooms[room] = state
        return state.flushAt
    }

    /// Stops every start that came from `connection` (it disconnected or left).
    public mutating func connectionClosed(_ connection: ConnectionID, now: Int64) {
        for (room, state) in rooms {
            for (user, entry) in state.entries where entry.connection == connection && entry.typing {
                stop(room: room, user: user, now: now)
            }
        }
    }

    /// Stops the user's typing in one room when `connection` leaves it.
    public mutating func connectionLeft(_ connection: ConnectionID, room: String, now: Int64) {
        guard let state = rooms[room] else { return }
        for (user, entry) in state.entries where entry.connection == connection && entry.typing {
            stop(room: room, user: user, now: now)
        }
    }

    private mutating func openWindow(_ state: inout RoomState, now: Int64) {
        if state.flushAt == nil { state.flushAt = now + window }
    }

    /// The earliest time `flush(now:)` has work to do, if any.
    public var nextDeadline: Int64? {
        var best: Int64?
        for state in rooms.values {
            if let f = state.flushAt { best = min(best ?? f, f) }
            for entry in state.entries.values where entry.typing {
                let e = entry.refreshedAt + expiry
                best = min(best ?? e, e)
            }
        }
        return best
    }

    /// Expires stale starts and closes the windows that are due; returns the net changes in
    /// room order, then user order.
    public mutating func flush(now: Int64) -> [Change] {
        var changes: [Change] = []
        for room in rooms.keys.sorted() {
            guard var state = rooms[room] else { continue }
            // The earliest expiry opens the window, whatever order the dictionary iterates in.
            let windowWasOpen = state.flushAt != nil
            for (user, entry) in state.entries where entry.typing && entry.refreshedAt + expiry <= now {
                state.entries[user]?.typing = false  // the key is there: we are iterating it
                if !windowWasOpen { state.flushAt = min(state.flushAt ?? .max, entry.refreshedAt + expiry + window) }
            }
            if let due = state.flushAt, due <= now {
                state.flushAt = nil
                for user in state.entries.keys.sorted() {
                    guard var entry = state.entries[user] else { continue }
                    if entry.typing != entry.announced {
                        changes.append(Change(room: room, user: user, isTyping: entry.typing))
                        entry.announced = entry.typing
                    }
                    if entry.typing || entry.announced { state.entries[user] = entry } else { state.entries.removeValue(forKey: user) }
                }
            }
            rooms[room] = state.entries.isEmpty && state.flushAt == nil ? nil : state
        }
        return changes
    }

    /// Users the room currently believes are typing (announced), sorted.
    public func typingUsers(room: String) -> [String] {
        (rooms[room]?.entries.filter { $0.value.announced }.map(\.key) ?? []).sorted()
    }

    public var activeRoomCount: Int { rooms.count }
}
