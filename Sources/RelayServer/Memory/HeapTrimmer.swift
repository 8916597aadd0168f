import Atomics
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// Gives the memory of ended connections back to the system.
///
/// Sessions that end free everything they held (`LiveObjects` returns to zero), but glibc keeps
/// freed heap pages in its arenas: after a wave of 20 000 abandoned handshakes RSS stayed about
/// 30 MiB above where it started, and `malloc_trim(0)` brought it back below. So, every
/// `interval`, once at least `afterSessions` sessions ended or connections closed since the last
/// trim, the heap is
/// trimmed — on NIO's thread pool, never on an event loop (it walks the arenas under their
/// locks; a few milliseconds at most, only after churn).
final class HeapTrimmer: Sendable {
    private let task: RepeatedTask

    init(on loop: any EventLoop, interval: TimeAmount, afterSessions: Int, metrics: RelayMetrics) {
        // Read and written by the repeated task only (one loop); atomic so it can be made here.
        let last = ManagedAtomic(LiveObjects.churn)
        task = loop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            let ended = LiveObjects.churn
            guard ended &- last.load(ordering: .relaxed) >= afterSessions else { return }
            last.store(ended, ordering: .relaxed)
            NIOThreadPool.singleton.submit { state in
                guard case .active = state else { return }
                Self.trim()
                metrics.heapTrims.increment()
            }
        }
    }

    func cancel() { task.cancel() }

    /// glibc's `malloc_trim`, looked up once (it is not in Swift's Glibc module: `<malloc.h>`);
    /// `nil` with another C library.
    private static let mallocTrim: (@convention(c) (Int) -> Int32)? = {
        #if canImport(Glibc)
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
        #else
        return nil
        #endif
    }()

    static var isAvailable: Bool { mallocTrim != nil }

    /// Returns free heap pages to the system (glibc); nothing elsewhere.
    static func trim() {
        _ = mallocTrim?(0)
    }
}
