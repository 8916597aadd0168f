import Foundation
import RelayCore

/// `GET /metrics`: the registry plus the values sampled at scrape time (rooms, members per
/// room, process memory).
struct MetricsEndpoint {
    let relay: RelayContext

    static let memberBuckets: [Int] = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000]

    func render() -> String {
        let hub = relay.hub
        hub.metrics.rooms.set(hub.roomCount)
        var out = hub.metrics.registry.render()
        // Members per room, computed fresh from the registry (not accumulated over scrapes).
        let sizes = hub.roomSizes()
        out += "# HELP relay_room_members Members per room, sampled at scrape\n# TYPE relay_room_members histogram\n"
        for bound in Self.memberBuckets {
            out += "relay_room_members_bucket{le=\"\(bound)\"} \(sizes.filter { $0 <= bound }.count)\n"
        }
        out += "relay_room_members_bucket{le=\"+Inf\"} \(sizes.count)\nrelay_room_members_sum \(sizes.reduce(0, +))\nrelay_room_members_count \(sizes.count)\n"
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
