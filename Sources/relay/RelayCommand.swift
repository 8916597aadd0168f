import ArgumentParser
import Foundation
import Logging
import RelayCore
import RelayServer
import ServiceLifecycle

@main
struct RelayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay",
        abstract: "Real-time messaging relay: Socket.IO v5 over WebSocket.",
        subcommands: [ServeCommand.self, TokenCommand.self, CheckConfigCommand.self, SettingsCommand.self],
        defaultSubcommand: ServeCommand.self
    )
}
