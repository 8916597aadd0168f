import RelayCore
import XCTest

@testable import RelayServer

/// The failed-authentication budgets (#42): per client (address and token), so that a client
/// retrying a bad token cannot get another client at the same address refused; per address,
/// ten times larger, for many different bad tokens.
final class AdmissionControlTests: XCTestCase {
    private func admission() -> AdmissionControl {
        AdmissionControl(maxConnections: 100, maxPerIP: 10, authFailures: .init(perSecond: 1, burst: 3))
    }

    func testOneClientsFailuresLeaveTheOthersAtItsAddressAlone() {
        let a = admission()
        for _ in 0..<3 {
            XCTAssertTrue(a.mayAuthenticate(ip: "10.0.0.1", token: "bad", now: 0))
            a.recordAuthFailure(ip: "10.0.0.1", token: "bad", now: 0)
        }
        XCTAssertFalse(a.mayAuthenticate(ip: "10.0.0.1", token: "bad", now: 0), "this client's budget is spent")
        XCTAssertTrue(a.mayAuthenticate(ip: "10.0.0.1", token: "valid", now: 0), "another client at the same address")
        XCTAssertTrue(a.mayAuthenticate(ip: "10.0.0.2", token: "bad", now: 0), "the same token from elsewhere")
        XCTAssertTrue(a.mayAuthenticate(ip: "10.0.0.1", token: "bad", now: 1_000), "refilled, 1 per second")
    }

    func testManyBadTokensFromOneAddressSpendItsBudget() {
        let a = admission()
        // The address's budget: 10 x the client's burst of 3.
        for n in 0..<30 {
            XCTAssertTrue(a.mayAuthenticate(ip: "10.0.0.1", token: "bad\(n)", now: 0), "\(n)")
            a.recordAuthFailure(ip: "10.0.0.1", token: "bad\(n)", now: 0)
        }
        XCTAssertFalse(a.mayAuthenticate(ip: "10.0.0.1", token: "valid", now: 0), "past the address's budget, everyone there waits")
        XCTAssertTrue(a.mayAuthenticate(ip: "10.0.0.2", token: "valid", now: 0))
        XCTAssertTrue(a.mayAuthenticate(ip: "10.0.0.1", token: "valid", now: 100), "10 per second refill the address")
    }
}
