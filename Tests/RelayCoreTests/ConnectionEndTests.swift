import XCTest
@testable import RelayCore

/// Why a connection ended: its metric label (read by dashboards and tests) and whether its
/// session is kept for recovery.
final class ConnectionEndTests: XCTestCase {
    func testEachCloseCodeHasTheLabelItAlwaysHad() {
        let expected: [(UInt16, String)] = [
            (CloseCode.normal, "client"), (CloseCode.goingAway, "shutdown"), (CloseCode.pingTimeout, "ping_timeout"),
            (CloseCode.connectTimeout, "connect_timeout"), (CloseCode.authenticationFailed, "auth_failed"), (CloseCode.kicked, "kicked"),
            (CloseCode.tokenExpired, "token_expired"), (CloseCode.policyViolation, "policy_violation"), (CloseCode.slowConsumer, "slow_consumer"),
            (CloseCode.replaced, "replaced"), (CloseCode.protocolError, "protocol_error"), (CloseCode.unsupportedData, "protocol_error"),
            (CloseCode.invalidPayloadData, "protocol_error"), (CloseCode.messageTooBig, "protocol_error"),
            (CloseCode.internalError, "closed"), (4999, "closed"),
        ]
        for (code, label) in expected {
            XCTAssertEqual(ConnectionEnd(closeCode: code).metricLabel, label, "\(code)")
        }
    }

    func testTheLabelsAreTheMetricsOwnInItsOrder() {
        XCTAssertEqual(
            ConnectionEnd.allCases.map(\.metricLabel),
            ["client", "ping_timeout", "connect_timeout", "auth_failed", "slow_consumer", "kicked", "token_expired", "shutdown",
             "protocol_error", "policy_violation", "replaced", "closed"])
        XCTAssertEqual(
            RecoveryResult.allCases.map(\.metricLabel),
            ["recovered", "unknown_session", "user_mismatch", "invalid_offset", "history_gone", "unavailable"])
    }

    func testOnlyADropAShutdownOrATakeoverKeepsTheSession() {
        let kept = ConnectionEnd.allCases.filter(\.keepsSessionForRecovery)
        XCTAssertEqual(kept, [.clientClosed, .pingTimeout, .shutdown, .replaced, .transportClosed])
        XCTAssertFalse(ConnectionEnd(closeCode: CloseCode.kicked).keepsSessionForRecovery)
        XCTAssertFalse(ConnectionEnd(closeCode: CloseCode.slowConsumer).keepsSessionForRecovery)
        XCTAssertFalse(ConnectionEnd(closeCode: CloseCode.tokenExpired).keepsSessionForRecovery)
        XCTAssertFalse(ConnectionEnd(closeCode: CloseCode.protocolError).keepsSessionForRecovery)
    }
}
