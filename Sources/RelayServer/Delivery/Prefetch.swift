import CPrefetch

/// Software prefetch for the fan-out walk (issue #15).
///
/// A delivery in a large room finds every object it touches cold: between two events the
/// kernel and the other sockets have long evicted them. Each object then costs a cache miss
/// in turn, one stalled load after the other. Asking for the next sockets' objects while the
/// current one is written lets those misses overlap its write.
enum Prefetch {
    /// The address of `object`, kept raw so that prefetching it later touches nothing (no
    /// reference count).
    @inline(__always)
    static func address(of object: AnyObject) -> UnsafeRawPointer {
        UnsafeRawPointer(Unmanaged.passUnretained(object).toOpaque())
    }

    /// Asks for `lines` cache lines from `address` (a hint: never faults, whatever the address).
    @inline(__always)
    static func lines(_ address: UnsafeRawPointer?, count: Int) {
        guard let address else { return }
        for line in 0..<count { relay_prefetch_for_write(address + line &* 64) }
    }
}
