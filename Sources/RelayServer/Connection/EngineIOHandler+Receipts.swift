import NIOCore
import RelayCore

extension EngineIOHandler {
    /// `message:delivered`, `message:read` and `receipt:sync` need the receipt store.
    func handleReceiptEvent(_ event: InboundEvent, user: AuthenticatedUser) throws(RelayError) -> JSONValue? {
        throw RelayError(.storeUnavailable, "receipts are not enabled on this relay")
    }
}
