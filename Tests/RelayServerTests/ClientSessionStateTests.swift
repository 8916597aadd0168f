import Foundation
import XCTest

/// `ClientSession`'s state — its Engine.IO session and its CONNECT's state — is private to it
/// (#41): handlers return the changes they ask for (`SocketChange`) and the socket carries them
/// out. A handler that reached in again would need the property to be visible, and fails here.
final class ClientSessionStateTests: XCTestCase {
    func testTheSocketsStateIsPrivateAndNoOtherFileChangesIt() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let server = root.appendingPathComponent("Sources/RelayServer")
        let socket = try String(contentsOf: server.appendingPathComponent("Connection/ClientSession.swift"), encoding: .utf8)
        for declaration in ["private var connectState", "private var session: EngineSession", "private var transports", "private var lifecycle"] {
            XCTAssertTrue(socket.contains(declaration), "ClientSession declares `\(declaration)`")
        }
        var checked = 0
        let files = FileManager.default.enumerator(at: server, includingPropertiesForKeys: nil)
        while let url = files?.nextObject() as? URL {
            guard url.pathExtension == "swift", url.lastPathComponent != "ClientSession.swift" else { continue }
            let text = try String(contentsOf: url, encoding: .utf8)
            checked += 1
            for reach in [".connectState", "socket.session.", ".session.connectFinished", "socket.perform("] {
                XCTAssertFalse(text.contains(reach), "\(url.lastPathComponent) reaches into a socket's state (`\(reach)`)")
            }
        }
        XCTAssertGreaterThan(checked, 50)
    }
}
