import NIOCore
import RelayCore

/// Where and how the relay listens: address, threads, TLS, the HTTP request and who may open a
/// socket (origins, load balancers).
public struct ListenerSettings: Sendable, Equatable {
    public var host = ""
    public var port = 0
    /// How many event loops (threads) serve sockets; defaults to `defaultEventLoopThreads`.
    public var eventLoopThreads = ListenerSettings.defaultEventLoopThreads
    /// PEM certificate chain and private key files; both set means TLS (wss://, https://).
    public var tlsCertificatePath: String?
    public var tlsKeyPath: String?
    /// Time for a TCP client to complete its HTTP request (upgrade or API call).
    public var handshakeTimeoutMs = 0
    /// Largest HTTP API request body.
    public var maxHTTPBodyBytes = 256 * 1024
    /// Origins allowed to open a WebSocket. Empty: only clients that send no `Origin` (native
    /// apps). `*` allows any origin.
    public var allowedOrigins: [String] = []
    /// Every connection must start with a PROXY protocol header (v1 or v2) sent by one of
    /// `trustedProxies`; the client it declares is the connection's address. Connections
    /// without one, or from any other peer, are closed.
    public var proxyProtocol = false
    /// The load balancers whose word about the client is believed: their PROXY header, and
    /// their `X-Forwarded-For` (right-most untrusted entry). Empty: nobody's.
    public var trustedProxies = TrustedProxies()
    /// One loop per core but one (at least one): the core left over runs the receipt writer,
    /// the store's readers and the kernel's network work. On 2 cores one loop cost 10–16 % less
    /// CPU per chat message than two at every rate measured, with the same saturated throughput
    /// (docs/BENCHMARKS.md, "How many event loops").
    public static var defaultEventLoopThreads: Int { max(1, NIOCore.System.coreCount - 1) }
    /// A WebSocket echo endpoint on the same stack, for conformance tests (off when `nil`).
    public var echoPath: String?

    /// Which browser origins may open a socket (the relay's own host only as `https` when it
    /// serves TLS itself).
    public var originPolicy: OriginPolicy {
        OriginPolicy(allowed: allowedOrigins, secure: tlsCertificatePath != nil && tlsKeyPath != nil)
    }

    public init() {}
}
