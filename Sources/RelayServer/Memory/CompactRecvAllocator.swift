import NIOCore

/// NIO's `AdaptiveRecvByteBufferAllocator` — the same sizes, grown and shrunk by the same rule —
/// in 17 bytes instead of 33.
///
/// A channel keeps its receive allocator as an existential, whose inline buffer holds 24 bytes:
/// NIO's adaptive allocator does not fit, so every socket's first read copied it into a heap
/// box of its own (about 64 bytes with the allocator's overhead, per socket for its whole life).
/// This one fits inline.
struct CompactRecvAllocator: RecvByteBufferAllocator {
    private let minimum: UInt32
    private let maximum: UInt32
    private var next: UInt32
    private var decreaseNow = false

    /// Sizes as NIO's adaptive allocator takes them: `minimum` and `initial` rounded down to a
    /// power of 2, `maximum` up, each at most 1 GiB; `minimum ≤ initial ≤ maximum`.
    init(minimum: Int, initial: Int, maximum: Int) {
        precondition(minimum >= 0 && initial >= minimum && maximum >= initial, "minimum ≤ initial ≤ maximum")
        let cap = 1 << 30
        self.minimum = UInt32(min(minimum, cap).previousPowerOfTwo)
        self.next = UInt32(min(initial, cap).previousPowerOfTwo)
        self.maximum = UInt32(min(maximum, cap).nextPowerOfTwo)
    }

    func buffer(allocator: ByteBufferAllocator) -> ByteBuffer {
        allocator.buffer(capacity: Int(next))
    }

    func nextBufferSize() -> Int? {
        Int(next)
    }

    /// Halves the size after two reads in a row that would have fit in half of it; doubles it
    /// (up to the maximum) after a read that filled it. `true` when it grew.
    mutating func record(actualReadBytes: Int) -> Bool {
        let lowerBound = next >> 1
        let upperBound = min(UInt64(next) << 1, UInt64(UInt32.max))
        if actualReadBytes <= Int(lowerBound) && lowerBound >= minimum {
            if decreaseNow {
                next = lowerBound
                decreaseNow = false
            } else {
                decreaseNow = true
            }
            return false
        }
        if actualReadBytes >= Int(next) && upperBound <= UInt64(maximum) && UInt64(next) != upperBound {
            next = UInt32(upperBound)
            decreaseNow = false
            return true
        }
        decreaseNow = false
        return false
    }
}

extension Int {
    /// The largest power of 2 at most `self` (0 for 0), as NIO rounds.
    fileprivate var previousPowerOfTwo: Int {
        guard self > 0 else { return 0 }
        return 1 << (Int.bitWidth - 1 - self.leadingZeroBitCount)
    }

    /// The smallest power of 2 at least `self` (1 for 0), as NIO rounds.
    fileprivate var nextPowerOfTwo: Int {
        guard self > 1 else { return 1 }
        return 1 << (Int.bitWidth - (self - 1).leadingZeroBitCount)
    }
}
