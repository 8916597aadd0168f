import Foundation
import NIOCore

/// The two clocks Relay reads: monotonic milliseconds for timers and limits, wall-clock
/// milliseconds for the `ts` it stamps. Injected so tests control time.
public struct RelayClock: Sendable {
    public var monotonicMs: @Sendable () -> Int64
    public var wallMs: @Sendable () -> Int64

    public init(monotonicMs: @escaping @Sendable () -> Int64, wallMs: @escaping @Sendable () -> Int64) {
        self.monotonicMs = monotonicMs
        self.wallMs = wallMs
    }

    public static let system = RelayClock(
        monotonicMs: { Int64(NIODeadline.now().uptimeNanoseconds / 1_000_000) },
        wallMs: { Int64(Date().timeIntervalSince1970 * 1000) }
    )
}
