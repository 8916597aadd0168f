import NIOCore
import RelayCore

/// The outcome of recording a receipt.
public struct RecordedReceipt: Equatable, Sendable {
    public var receipt: Receipt
    /// `false` when the same (messageId, userId, kind) was stored before: `receipt` is that one.
    public var isNew: Bool

    public init(receipt: Receipt, isNew: Bool) {
        self.receipt = receipt
        self.isNew = isNew
    }
}

/// Why the store could not answer.
public enum ReceiptStoreError: Error, Equatable, Sendable {
    /// The write or read failed (disk full, I/O error, locked); nothing was acknowledged.
    case unavailable(String)
    /// The store is shutting down.
    case closed
}

/// Durable delivery receipts. Futures complete on the event loop passed in, and a `record`
/// future succeeds only after the transaction holding the receipt has committed.
extension ReceiptStore {
    public func recordAll(_ receipts: [NewReceipt], on eventLoop: any EventLoop) -> EventLoopFuture<[RecordedReceipt]> {
        EventLoopFuture.whenAllSucceed(receipts.map { record($0, on: eventLoop) }, on: eventLoop)
    }
}

public protocol ReceiptStore: Sendable {
    func record(_ receipt: NewReceipt, on eventLoop: any EventLoop) -> EventLoopFuture<RecordedReceipt>
    /// Records several receipts, handed to the writer together so that they share a group
    /// commit (as long as they fit in one batch); completes when all have committed.
    func recordAll(_ receipts: [NewReceipt], on eventLoop: any EventLoop) -> EventLoopFuture<[RecordedReceipt]>
    /// Receipts on messages authored by `authorID` with `id > since`, ascending, at most `limit`.
    func sync(authorID: String, since: Int64, limit: Int, on eventLoop: any EventLoop) -> EventLoopFuture<[Receipt]>
    /// Receipts of one message, ascending.
    func receipts(messageID: String, limit: Int, on eventLoop: any EventLoop) -> EventLoopFuture<[Receipt]>
    /// Succeeds when a write transaction can commit (readiness).
    func checkWritable(on eventLoop: any EventLoop) -> EventLoopFuture<Void>
}
