import Foundation
import Logging
import RelayCore

/// Sets up swift-log for the process: text (swift-log's stream handler) or one JSON object per
/// line, at the chosen level. Relay logs one line per connect/disconnect at info and nothing per
/// event at info; no secret is ever logged.
public enum RelayLogging {
    public static func bootstrap(level: String, format: String) -> Logger {
        let lvl = Logger.Level(rawValue: level) ?? .info
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler = format == "json" ? JSONLogHandler(label: label) : StreamLogHandler.standardOutput(label: label)
            handler.logLevel = lvl
            return handler
        }
        var logger = Logger(label: "relay")
        logger.logLevel = lvl
        return logger
    }
}

/// One JSON object per log line: `{"ts","level","label","message",…metadata}`.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    public let label: String
    private let write: @Sendable (String) -> Void

    public init(label: String, write: @escaping @Sendable (String) -> Void = { line in FileHandle.standardOutput.write(Data(line.utf8)) }) {
        self.label = label
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields: [(String, JSONValue)] = [
            ("ts", .string(Self.timestamp())), ("level", .string(event.level.rawValue)), ("label", .string(label)), ("message", .string(event.message.description)),
        ]
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        for (k, v) in merged.sorted(by: { $0.key < $1.key }) { fields.append((k, .string(v.description))) }
        write(JSONWriter.string(.object(fields)) + "\n")
    }

    static func timestamp() -> String {
        let now = Date()
        var t = time_t(now.timeIntervalSince1970)
        var tm = tm()
        gmtime_r(&t, &tm)
        let ms = Int(now.timeIntervalSince1970 * 1000) % 1000
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms)
    }
}
