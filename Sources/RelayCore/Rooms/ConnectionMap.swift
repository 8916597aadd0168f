/// Values keyed by connection, the first one kept inline. A user's sockets are usually one,
/// and a dictionary per user would cost an allocation (about 100 bytes with the allocator's
/// overhead) that a single entry does not need.
public enum ConnectionMap<Value> {
    case empty
    case one(ConnectionID, Value)
    case many([ConnectionID: Value])

    public init() { self = .empty }

    public var count: Int {
        switch self {
        case .empty: return 0
        case .one: return 1
        case .many(let all): return all.count
        }
    }

    public var isEmpty: Bool { count == 0 }

    public subscript(id: ConnectionID) -> Value? {
        switch self {
        case .empty: return nil
        case .one(let key, let value): return key == id ? value : nil
        case .many(let all): return all[id]
        }
    }

    /// Adds or replaces the value of `id`.
    public mutating func set(_ id: ConnectionID, _ value: Value) {
        switch self {
        case .empty:
            self = .one(id, value)
        case .one(let key, let old):
            self = key == id ? .one(id, value) : .many([key: old, id: value])
        case .many(var all):
            self = .empty  // no second reference while it changes (no copy of the dictionary)
            all[id] = value
            self = .many(all)
        }
    }

    public mutating func remove(_ id: ConnectionID) {
        switch self {
        case .empty:
            return
        case .one(let key, _):
            if key == id { self = .empty }
        case .many(var all):
            self = .empty
            all.removeValue(forKey: id)
            if all.count == 1, let (key, value) = all.first { self = .one(key, value) } else if !all.isEmpty { self = .many(all) }
        }
    }

    /// Calls `body` for every entry, without making an array.
    public func forEach(_ body: (ConnectionID, Value) throws -> Void) rethrows {
        switch self {
        case .empty: return
        case .one(let key, let value): try body(key, value)
        case .many(let all): for (key, value) in all { try body(key, value) }
        }
    }

    public var keys: [ConnectionID] {
        var out: [ConnectionID] = []
        forEach { key, _ in out.append(key) }
        return out
    }

    public var values: [Value] {
        var out: [Value] = []
        forEach { _, value in out.append(value) }
        return out
    }
}

extension ConnectionMap: Sendable where Value: Sendable {}
