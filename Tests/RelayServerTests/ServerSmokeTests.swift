import XCTest
@testable import RelayServer
final class ServerSmokeTests: XCTestCase { func testVersion() { XCTAssertFalse(RelayServerVersion.string.isEmpty) } }
