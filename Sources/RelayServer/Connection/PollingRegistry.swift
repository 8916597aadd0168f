import Atomics
import NIOConcurrencyHelpers
import NIOCore
import RelayBackends
import RelayCore
import RelayLocks

/// Every long-polling session of this node by Engine.IO `sid`, so that each request (and the
/// WebSocket that upgrades it) finds its session, whatever loop the request arrived on.
/// Touched once per request, never per delivered event.
final class PollingRegistry: Sendable {
    /// A session and the loop it lives on; any thread may hold one, only that loop opens it.
    ///
    /// A class: a WebSocket that upgrades a polling session keeps one (in its `SessionLink`),
    /// and as a struct its 88 bytes would sit in the link of every WebSocket, upgraded or not.
    final class Handle: Sendable {
        let session: NIOLoopBound<ClientSession>
        /// The polling transport (the polling endpoint's own type; held as a transport here, so
        /// the connection code does not depend on the polling code).
        let transport: NIOLoopBound<any SessionTransport>
        let loop: any EventLoop
        /// The largest body a `POST` may carry: the session's limit in force (`LimitsInForce`),
        /// `maxPayload` while connected, the small pre-authentication one before CONNECT and
        /// after a `41`. Set on the session's loop whenever it changes, read by any request.
        let bodyLimit: ManagedAtomic<Int>
        /// A `POST` of this session is being read or run: a second one at once is refused.
        let postInFlight: ManagedAtomic<Bool>

        init(
            session: NIOLoopBound<ClientSession>, transport: NIOLoopBound<any SessionTransport>, loop: any EventLoop, bodyLimit: ManagedAtomic<Int>,
            postInFlight: ManagedAtomic<Bool>
        ) {
            self.session = session
            self.transport = transport
            self.loop = loop
            self.bodyLimit = bodyLimit
            self.postInFlight = postInFlight
        }
    }

    private let table = AuditedLock<[String: Handle]>([:])

    init() {}

    func insert(_ sid: String, _ handle: Handle) { table.withLockedValue { $0[sid] = handle } }
    func remove(_ sid: String) { table.withLockedValue { _ = $0.removeValue(forKey: sid) } }
    func lookup(_ sid: String) -> Handle? { table.withLockedValue { $0[sid] } }
    var count: Int { table.withLockedValue { $0.count } }
}
