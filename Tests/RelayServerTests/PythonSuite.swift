import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs a Python test program (the end-to-end pytest suite, the conformance runner) against the
/// built `relay` binary, bounded in time, and fails the calling test on a non-zero exit.
///
/// Needs the Python venv (`.venv`, or `RELAY_TEST_PYTHON`) and the binary (`.build/debug/relay`,
/// or `RELAY_BIN`); `scripts/test.sh` sets up both. A missing one is a failure, never a skip.
enum PythonSuite {
    /// After a timeout: time between SIGINT (the program stops the relays it started) and SIGKILL.
    static let interruptGraceSeconds: Double = 30

    static var packageRoot: URL {
        // <root>/Tests/RelayServerTests/PythonSuite.swift
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    static func run(_ label: String, arguments: [String], requirements: String, timeoutSeconds: Double, file: StaticString = #filePath, line: UInt = #line) throws {
        let root = packageRoot
        let env = ProcessInfo.processInfo.environment
        let python = env["RELAY_TEST_PYTHON"].flatMap { $0.isEmpty ? nil : $0 } ?? root.appendingPathComponent(".venv/bin/python").path
        let relay = env["RELAY_BIN"].flatMap { $0.isEmpty ? nil : $0 } ?? root.appendingPathComponent(".build/debug/relay").path
        let files = FileManager.default
        guard files.isExecutableFile(atPath: python) else {
            XCTFail("\(label) needs Python with the packages of \(requirements) at \(python) (or RELAY_TEST_PYTHON): run scripts/test.sh", file: file, line: line)
            return
        }
        guard files.isExecutableFile(atPath: relay) else {
            XCTFail("\(label) needs the relay binary at \(relay) (or RELAY_BIN): run scripts/test.sh (it runs swift build)", file: file, line: line)
            return
        }

        let output = files.temporaryDirectory.appendingPathComponent("relay-\(UUID().uuidString).log")
        XCTAssertTrue(files.createFile(atPath: output.path, contents: nil))
        defer { try? files.removeItem(at: output) }
        let handle = try FileHandle(forWritingTo: output)
        defer { try? handle.close() }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = arguments
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
        if exited.wait(timeout: .now() + timeoutSeconds) == .timedOut {
            timedOut = true
            process.interrupt()
            if exited.wait(timeout: .now() + interruptGraceSeconds) == .timedOut {
                kill(process.processIdentifier, SIGKILL)
                _ = exited.wait(timeout: .now() + interruptGraceSeconds)
            }
        }

        let log = (try? String(contentsOf: output, encoding: .utf8)) ?? "<no output>"
        print("---- \(label) ----\n\(log)\n---- end of \(label) ----")
        XCTAssertFalse(timedOut, "\(label) did not finish within \(Int(timeoutSeconds)) s", file: file, line: line)
        if !timedOut {
            XCTAssertEqual(process.terminationStatus, 0, "\(label) failed (exit status \(process.terminationStatus)); its output is above", file: file, line: line)
        }
    }
}
