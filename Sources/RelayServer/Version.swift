import RelayCore
import NIOCore
import NIOPosix
import NIOHTTP1
import NIOWebSocket
import JWTKit
import GRDB
import Logging
import Metrics
import ServiceLifecycle
public enum RelayServerVersion { public static let string = RelayCoreVersion.string }
