import NIOCore
import NIOHTTP1
import RelayCore
import RelayStore

/// `GET /api/v1/receipts?messageId=…`: a message's stored receipts, for the backend.
struct ReceiptsEndpoint {
    let store: (any ReceiptStore)?
    static let limit = 1000

    func handle(query: QueryString, on eventLoop: any EventLoop) -> EventLoopFuture<HTTPResponse> {
        guard let store else {
            return eventLoop.makeSucceededFuture(.error(.serviceUnavailable, code: RelayErrorCode.storeUnavailable.rawValue, message: "receipts are not enabled"))
        }
        guard let messageID = query["messageId"], Identifier.isValid(messageID, maxBytes: EventValidator.maxMessageIDLength) else {
            return eventLoop.makeSucceededFuture(
                .error(.badRequest, code: "invalid_payload", message: "messageId query parameter is required (1-\(EventValidator.maxMessageIDLength) bytes, Unicode NFC)"))
        }
        return store.receipts(messageID: messageID, limit: Self.limit, on: eventLoop).map { receipts in
            HTTPResponse.json(.ok, .object([("receipts", .array(receipts.map(\.json)))]))
        }.recover { _ in
            HTTPResponse.error(.serviceUnavailable, code: RelayErrorCode.storeUnavailable.rawValue, message: RelayErrorCode.storeUnavailable.message)
        }
    }
}
