import NIOCore
import RelayCore

@testable import RelayServer
@testable import RelayBackends

/// A broker that forwards everything to a memory broker; tests subclass it to change one step
/// (when a subscription completes, what happens before an append). (`@unchecked Sendable`:
/// subclasses guard their own state; the memory broker is Sendable.)
class ForwardingBroker: Broker, @unchecked Sendable {
    let memory: MemoryBroker

    init(_ memory: MemoryBroker) { self.memory = memory }

    var keepsHistory: Bool { memory.keepsHistory }
    var crossesNodes: Bool { memory.crossesNodes }
    func attach(_ subscriber: any BrokerSubscriber) { memory.attach(subscriber) }
    func subscribe(_ stream: StreamKey) { memory.subscribe(stream) }
    func unsubscribe(_ stream: StreamKey) { memory.unsubscribe(stream) }
    func whenSubscribed(_ stream: StreamKey, on loop: any EventLoop) -> EventLoopFuture<Void> { memory.whenSubscribed(stream, on: loop) }
    func publish(_ publication: Publication, to stream: StreamKey, routing: Routing, recoverable: Bool, deliver: @escaping @Sendable (StreamOffset?) -> Void) {
        memory.publish(publication, to: stream, routing: routing, recoverable: recoverable, deliver: deliver)
    }
    func history(of stream: StreamKey, after offset: StreamOffset, limit: Int, maxBytes: Int, on loop: any EventLoop)
        -> EventLoopFuture<Result<HistoryPage<Publication>, HistoryError>>
    {
        memory.history(of: stream, after: offset, limit: limit, maxBytes: maxBytes, on: loop)
    }
}
