import GRDB
import NIOCore
import NIOPosix

extension NIOThreadPool {
    /// Reads `pool` on one of these threads, off the event loops; a failure comes back as
    /// `ReceiptStoreError.unavailable`. (The receipt store's and the replication ledger's reads.)
    func read<T: Sendable>(_ pool: DatabasePool, on eventLoop: any EventLoop, _ body: @escaping @Sendable (Database) throws -> T) -> EventLoopFuture<T> {
        runIfActive(eventLoop: eventLoop) {
            do {
                return try pool.read(body)
            } catch {
                throw ReceiptStoreError.unavailable(String(describing: error))
            }
        }
    }
}
