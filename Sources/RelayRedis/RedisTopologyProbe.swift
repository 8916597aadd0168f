import NIOCore
import NIOPosix

/// Finds where the masters are: asks the sentinels for theirs (and checks its `ROLE`), or a
/// cluster node for its slot map, or takes the one Redis. Holds nothing between looks: the
/// client makes one per look, with its own links (`connect`) and what it last knew.
struct RedisTopologyProbe: Sendable {
    let endpoint: RedisEndpoint
    let eventLoop: any EventLoop
    let options: RedisClient.Options
    /// A live link to an address: the client's own (one per master).
    let connect: @Sendable (RedisEndpoint.Address) -> EventLoopFuture<RedisNodeLink>
    /// A link that did not answer a question in time (the client drops it).
    let stalled: @Sendable (RedisNodeLink) -> Void

    /// The current masters and what the endpoint is. `known`: masters whose links are up, asked
    /// first; then the seeds, then every node the last map named (`lastNodes`).
    func discover(known: [RedisEndpoint.Address], lastNodes: [RedisEndpoint.Address]) -> EventLoopFuture<(RedisSlotMap, RedisClient.Topology)> {
        if let master = endpoint.sentinelMaster {
            return askSentinels(for: master, from: endpoint.addresses[...]).flatMap { address in
                connect(address).flatMap { link in
                    ask(link, ["ROLE"]).flatMapThrowing { role in
                        // A sentinel may name a master that has not finished its promotion yet.
                        guard role.elements?.first?.string == "master" else { throw RESPError.server("not a master yet") }
                        return (RedisSlotMap(single: address), .sentinel)
                    }
                }
            }
        }
        var candidates = known
        for address in endpoint.addresses + lastNodes where !candidates.contains(address) { candidates.append(address) }
        return askForSlots(candidates[...])
    }

    private func askForSlots(_ candidates: ArraySlice<RedisEndpoint.Address>) -> EventLoopFuture<(RedisSlotMap, RedisClient.Topology)> {
        guard let address = candidates.first else { return eventLoop.makeFailedFuture(RESPError.unavailable) }
        let loop = eventLoop
        return connect(address).flatMap { link in
            ask(link, ["CLUSTER", "SLOTS"]).flatMapThrowing { reply -> (RedisSlotMap, RedisClient.Topology) in
                guard let map = RedisSlotMap(clusterSlots: reply, answeredBy: address), !map.masters.isEmpty else {
                    throw RESPError.server("no cluster slot map")
                }
                return (map, .cluster)
            }.flatMapError { error in
                // Not a cluster: this is the one Redis.
                if case RESPError.server(let message) = error, message.contains("cluster support disabled") {
                    return loop.makeSucceededFuture((RedisSlotMap(single: address), .single))
                }
                return loop.makeFailedFuture(error)
            }
        }.flatMapError { _ in askForSlots(candidates.dropFirst()) }
    }

    /// A topology question on one link, bounded by the command timeout: a server that does not
    /// answer is treated as gone (so a look can never wait forever).
    private func ask(_ link: RedisNodeLink, _ args: [String]) -> EventLoopFuture<RESPValue> {
        let promise = eventLoop.makePromise(of: RESPValue.self)
        let stalled = stalled
        let timer = eventLoop.scheduleTask(in: options.commandTimeout) {
            promise.fail(RESPError.unavailable)
            stalled(link)
        }
        link.send(args).whenComplete { result in
            timer.cancel()
            promise.completeWith(result)
        }
        return promise.futureResult
    }

    /// `SENTINEL get-master-addr-by-name` of each sentinel in turn, on a connection of its own.
    private func askSentinels(for master: String, from sentinels: ArraySlice<RedisEndpoint.Address>) -> EventLoopFuture<RedisEndpoint.Address> {
        guard let sentinel = sentinels.first else { return eventLoop.makeFailedFuture(RESPError.unavailable) }
        let loop = eventLoop
        let timeout = options.connectTimeout
        return RedisNodeLink.bootstrap(loop, timeout: timeout) { _ in }.connect(host: sentinel.host, port: sentinel.port).flatMap { channel in
            var bytes = channel.allocator.buffer(capacity: 64)
            RESPParser.encodeCommand(["SENTINEL", "get-master-addr-by-name", master], into: &bytes)
            let promise = loop.makePromise(of: RESPValue.self)
            channel.writeAndFlush(RedisConnectionHandler.RedisRequest(bytes: bytes, promise: promise), promise: nil)
            let timer = loop.scheduleTask(in: timeout) { promise.fail(RESPError.unavailable) }
            return promise.futureResult.always { _ in
                timer.cancel()
                channel.close(promise: nil)
            }
        }.flatMapThrowing { reply -> RedisEndpoint.Address in
            guard let parts = reply.elements, parts.count == 2, let host = parts[0].string, let port = parts[1].string.flatMap({ Int($0) }),
                (1...65535).contains(port), !host.isEmpty
            else { throw RESPError.server("sentinel does not know master \(master)") }
            return RedisEndpoint.Address(host: host, port: port)
        }.flatMapError { _ in askSentinels(for: master, from: sentinels.dropFirst()) }
    }
}
