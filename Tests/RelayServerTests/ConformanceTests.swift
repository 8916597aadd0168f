import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs the WebSocket conformance suite (`Tests/conformance/run_conformance.py`: the Autobahn
/// TestSuite cases, driven by kosoku, against the relay's echo endpoint) in its fast mode.
///
/// Needs the Python venv (`.venv`, or `RELAY_TEST_PYTHON`) with the packages of
/// `Tests/conformance/requirements.txt` and the binary (`.build/debug/relay`, or `RELAY_BIN`);
/// `scripts/test.sh` sets up both. A missing one is a failure, never a skip.
/// `RELAY_CONFORMANCE_FULL=1` runs every case instead (about 12 minutes).
final class ConformanceTests: XCTestCase {
    /// Upper bound of the whole run (the script bounds the suite itself below this).
    static let timeoutSeconds: Double = 900
    static let fullTimeoutSeconds: Double = 2400
    /// After a timeout: time between SIGINT (the script stops its relay) and SIGKILL.
    static let interruptGraceSeconds: Double = 30

    static var packageRoot: URL {
        // <root>/Tests/RelayServerTests/ConformanceTests.swift
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    func testAutobahnConformance() throws {
        let root = Self.packageRoot
        let env = ProcessInfo.processInfo.environment
        let python = env["RELAY_TEST_PYTHON"].flatMap { $0.isEmpty ? nil : $0 } ?? root.appendingPathComponent(".venv/bin/python").path
        let relay = env["RELAY_BIN"].flatMap { $0.isEmpty ? nil : $0 } ?? root.appendingPathComponent(".build/debug/relay").path
        let full = env["RELAY_CONFORMANCE_FULL"] == "1"
        let files = FileManager.default
        guard files.isExecutableFile(atPath: python) else {
            XCTFail("conformance tests need Python with the packages of Tests/conformance/requirements.txt at \(python) (or RELAY_TEST_PYTHON): run scripts/test.sh")
            return
        }
        guard files.isExecutableFile(atPath: relay) else {
            XCTFail("conformance tests need the relay binary at \(relay) (or RELAY_BIN): run scripts/test.sh (it runs swift build)")
            return
        }

        let output = files.temporaryDirectory.appendingPathComponent("relay-conformance-\(UUID().uuidString).log")
        XCTAssertTrue(files.createFile(atPath: output.path, contents: nil))
        defer { try? files.removeItem(at: output) }
        let handle = try FileHandle(forWritingTo: output)
        defer { try? handle.close() }

        let timeout = full ? Self.fullTimeoutSeconds : Self.timeoutSeconds
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = ["Tests/conformance/run_conformance.py", "--no-html", "--timeout", String(Int(timeout - 60))] + (full ? ["--full"] : [])
        process.currentDirectoryURL = root
        var childEnv = env
        childEnv["RELAY_BIN"] = relay
        childEnv["PYTHONDONTWRITEBYTECODE"] = "1"
        childEnv["PYTHONUNBUFFERED"] = "1"
        process.environment = childEnv
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = handle
        process.standardError = handle

        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        try process.run()

        var timedOut = false
        if exited.wait(timeout: .now() + timeout) == .timedOut {
            timedOut = true
            process.interrupt()  // SIGINT: the script stops its kosoku worker and its relay.
            if exited.wait(timeout: .now() + Self.interruptGraceSeconds) == .timedOut {
                kill(process.processIdentifier, SIGKILL)
                _ = exited.wait(timeout: .now() + Self.interruptGraceSeconds)
            }
        }

        let log = (try? String(contentsOf: output, encoding: .utf8)) ?? "<no output>"
        print("---- Tests/conformance/run_conformance.py ----\n\(log)\n---- end of conformance output ----")
        XCTAssertFalse(timedOut, "the conformance suite did not finish within \(Int(timeout)) s")
        if !timedOut {
            XCTAssertEqual(process.terminationStatus, 0, "WebSocket conformance failed (exit status \(process.terminationStatus)); its output is above, the summary in .build-conformance/summary.json")
        }
    }
}
