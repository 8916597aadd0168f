import ArgumentParser
import Foundation
import RelayServer

/// `relay token`: prints a signed HS256 client token.
struct TokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "token", abstract: "Print a signed HS256 client token.")

    @Option(help: "The HS256 secret (at least 32 bytes); defaults to $RELAY_JWT_SECRET.")
    var secret: String?

    @Option(help: "The user id (sub claim).")
    var sub: String

    @Option(help: "Rooms the user may join, comma-separated; exact names or prefixes ending in '*'.")
    var rooms: String?

    @Option(help: "Seconds until the token expires.")
    var ttl: Int64 = 3600

    func run() async throws {
        guard let secret = secret ?? ProcessInfo.processInfo.environment["RELAY_JWT_SECRET"] else {
            throw ValidationError("--secret (or RELAY_JWT_SECRET) is required")
        }
        do {
            try TokenIssuer.validateSecret(secret)
        } catch {
            throw ValidationError(error.description)
        }
        guard ttl > 0 else { throw ValidationError("--ttl must be positive") }
        let roomList = rooms?.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        print(try await TokenIssuer.sign(secret: secret, subject: sub, rooms: roomList, ttlSeconds: ttl))
    }
}
