import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs the end-to-end suite (`Tests/e2e`, pytest) against the built `relay` binary.
///
/// Needs the Python venv (`.venv`, or `RELAY_TEST_PYTHON`) and the binary (`.build/debug/relay`,
/// or `RELAY_BIN`); `scripts/test.sh` sets up both. A missing one is a failure, never a skip.
final class EndToEndTests: XCTestCase {
    /// Upper bound of the whole pytest run.
    static let timeoutSeconds: Double = 600
    /// After a timeout: time between SIGINT (pytest tears its relays down) and SIGKILL.
    static let interruptGraceSeconds: Double = 30

    static var packageRoot: URL {
        // <root>/Tests/RelayServerTests/EndToEndTests.swift
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    func testPytestSuite() throws {
        let root = Self.packageRoot
        let env = ProcessInfo.processInfo.environment
        let python = env["RELAY_TEST_PYTHON"].flatMap { $0.isEmpty ? nil : $0 } ?? root.appendingPathComponent(".venv/bin/python").path
        let relay = env["RELAY_BIN"].flatMap { $0.isEmpty ? nil : $0 } ?? root.appendingPathComponent(".build/debug/relay").path
        let files = FileManager.default
        guard files.isExecutableFile(atPath: python) else {
            XCTFail("end-to-end tests need Python with the packages of Tests/e2e/requirements.txt at \(python) (or RELAY_TEST_PYTHON): run scripts/test.sh")
            return
        }
        guard files.isExecutableFile(atPath: relay) else {
            XCTFail("end-to-end tests need the relay binary at \(relay) (or RELAY_BIN): run scripts/test.sh (it runs swift build)")
            return
        }

        let output = files.temporaryDirectory.appendingPathComponent("relay-e2e-\(UUID().uuidString).log")
        XCTAssertTrue(files.createFile(atPath: output.path, contents: nil))
        defer { try? files.removeItem(at: output) }
        let handle = try FileHandle(forWritingTo: output)
        defer { try? handle.close() }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "Tests/e2e"]
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
        if exited.wait(timeout: .now() + Self.timeoutSeconds) == .timedOut {
            timedOut = true
            process.interrupt()  // SIGINT: pytest runs its teardown and stops its relays.
            if exited.wait(timeout: .now() + Self.interruptGraceSeconds) == .timedOut {
                kill(process.processIdentifier, SIGKILL)
                _ = exited.wait(timeout: .now() + Self.interruptGraceSeconds)
            }
        }

        let log = (try? String(contentsOf: output, encoding: .utf8)) ?? "<no output>"
        print("---- pytest Tests/e2e ----\n\(log)\n---- end of pytest output ----")
        XCTAssertFalse(timedOut, "pytest did not finish within \(Int(Self.timeoutSeconds)) s")
        if !timedOut {
            XCTAssertEqual(process.terminationStatus, 0, "pytest Tests/e2e failed (exit status \(process.terminationStatus)); its output is above")
        }
    }
}
