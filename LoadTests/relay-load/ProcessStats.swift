import Foundation

/// Reads another process's memory and CPU from /proc (the relay under test).
enum ProcessStats {
    /// Resident set size in bytes (`VmRSS`).
    static func rss(pid: Int32) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let parts = line.split(separator: " ", omittingEmptySubsequences: true)
            if parts.count >= 2, let kb = Int(parts[1]) { return kb * 1024 }
        }
        return nil
    }

    /// User + system CPU time in microseconds.
    static func cpuMicros(pid: Int32) -> Int? {
        cpuTimes(pid: pid).map { $0.user + $0.system }
    }

    /// User and system CPU time in microseconds, apart: system time is the kernel's work for
    /// the process (syscalls, and on loopback most of the receiver's TCP path too), user time
    /// the server's own code and libraries.
    static func cpuTimes(pid: Int32) -> (user: Int, system: Int)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // After the command: state is field 3; utime and stime are fields 14 and 15.
        guard fields.count > 13, let utime = Int(fields[11]), let stime = Int(fields[12]) else { return nil }
        let ticks = sysconf(Int32(_SC_CLK_TCK))
        guard ticks > 0 else { return nil }
        return (utime * 1_000_000 / ticks, stime * 1_000_000 / ticks)
    }

    /// Open file descriptors of the process.
    static func openFiles(pid: Int32) -> Int? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd"))?.count
    }
}
