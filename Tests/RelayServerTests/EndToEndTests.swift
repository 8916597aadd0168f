import XCTest

/// Runs the end-to-end suite (`Tests/e2e`, pytest with python-socketio, websockets, aiohttp,
/// headless Chromium, redis-server) against real relay processes on 127.0.0.1.
final class EndToEndTests: XCTestCase {
    func testPytestSuite() throws {
        try PythonSuite.run(
            "pytest Tests/e2e", arguments: ["-m", "pytest", "-q", "-p", "no:cacheprovider", "Tests/e2e"],
            requirements: "Tests/e2e/requirements.txt", timeoutSeconds: 900)
    }
}
