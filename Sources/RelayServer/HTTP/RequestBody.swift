import NIOCore

/// One HTTP request's body as it arrives, under the policy decided from its head: kept up to a
/// limit (then dropped and answered 413), read and dropped, or refused with an answer decided
/// before a byte of it was kept.
struct RequestBody {
    private(set) var bytes: ByteBuffer?
    /// Largest body kept.
    private(set) var limit = 0
    /// The body passed `limit`: what arrived is dropped and the request is answered 413.
    private(set) var tooLarge = false
    /// The body is not kept (`BodyPolicy.discard`, `.refuse`).
    private var discarding = false
    /// Body bytes arrived while discarding.
    private(set) var dropped = false
    /// A refusal decided from the head, answered once the request ends.
    private(set) var refusal: HTTPResponse?

    /// Before any head: nothing kept, nothing allowed.
    init() {}

    /// A request's body under `policy`; what `policy` asks to be released is the caller's.
    init(policy: BodyPolicy) {
        switch policy {
        case .read(let limit, _):
            self.limit = limit
        case .discard:
            discarding = true
        case .refuse(let response):
            discarding = true
            refusal = response
        }
    }

    /// Keeps `chunk` while the body stays within the limit.
    mutating func append(_ chunk: inout ByteBuffer) {
        guard !discarding else {
            dropped = dropped || chunk.readableBytes > 0
            return
        }
        guard !tooLarge else { return }
        if (bytes?.readableBytes ?? 0) + chunk.readableBytes > limit {
            tooLarge = true
            bytes = nil
            return
        }
        if var existing = bytes {
            existing.writeBuffer(&chunk)
            bytes = existing
        } else {
            bytes = chunk
        }
    }

    /// The body kept, handed over once.
    mutating func take() -> [UInt8] {
        defer { bytes = nil }
        return bytes.map { Array($0.readableBytesView) } ?? []
    }
}
