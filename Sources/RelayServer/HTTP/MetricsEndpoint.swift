import Foundation
import RelayBackends
import RelayCore

/// `GET /metrics`: the registry plus the values sampled at scrape time (rooms, members per
/// room, process memory).
struct MetricsEndpoint {
    let rooms: RoomDirectory
    let metrics: RelayMetrics
    /// The memory broker's history, on one node (its size is sampled at scrape).
    let memoryHistory: MemoryBroker?
    let pollingSessions: PollingRegistry

    init(relay: RelayContext) {
        self.rooms = relay.hub.rooms
        self.metrics = relay.metrics
        self.memoryHistory = relay.hub.backends.memoryHistory
        self.pollingSessions = relay.pollingSessions
    }

    func render() -> String {
        // One copy of a fixed-size histogram under the lock: the scrape costs the same with
        // 30 000 rooms as with 10.
        let sizes = rooms.roomSizes()
        metrics.delivery.rooms.set(sizes.rooms)
        let history = memoryHistory?.memoryUsage ?? (events: 0, bytes: 0)
        metrics.delivery.historyEvents.set(history.events)
        metrics.delivery.historyBytes.set(history.bytes)
        var out = metrics.registry.render()
        out += "# HELP relay_room_members Members per room, sampled at scrape\n# TYPE relay_room_members histogram\n"
        for (bound, count) in zip(RoomSizeHistogram.bounds, sizes.cumulative) {
            out += "relay_room_members_bucket{le=\"\(bound)\"} \(count)\n"
        }
        out += "relay_room_members_bucket{le=\"+Inf\"} \(sizes.rooms)\nrelay_room_members_sum \(sizes.sum)\nrelay_room_members_count \(sizes.rooms)\n"
        out += LiveObjects.render()
        out += "# HELP relay_polling_sessions Long-polling sessions this node can find by sid\n# TYPE relay_polling_sessions gauge\nrelay_polling_sessions \(pollingSessions.count)\n"
        if let rss = ProcessMemory.residentBytes() {
            out += "# HELP process_resident_memory_bytes Resident memory size in bytes\n# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes \(rss)\n"
        }
        if let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count {
            out += "# HELP process_open_fds Open file descriptors\n# TYPE process_open_fds gauge\nprocess_open_fds \(fds)\n"
        }
        return out
    }
}

/// The process's own memory, from /proc.
enum ProcessMemory {
    static func residentBytes() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let parts = line.split(separator: " ", omittingEmptySubsequences: true)
            if parts.count >= 2, let kb = Int(parts[1]) { return kb * 1024 }
        }
        return nil
    }
}
