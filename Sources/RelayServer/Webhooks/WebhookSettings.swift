import RelayCore

/// The webhook settings (`--webhook-*`, docs/PROTOCOL.md §13). No URL: webhooks are off.
/// A property a setting writes starts at zero: `RelayConfiguration.init` writes the declared
/// default (`ConfigurationLoader.settings`). `minBackoffMs` is no setting; its value is here.
public struct WebhookSettings: Sendable, Equatable {
    /// Every event goes to each of these URLs (http:// or https://).
    public var urls: [String] = []
    /// The HMAC-SHA256 key of the `X-Relay-Signature` header (≥ 32 characters). Never logged.
    public var secret = ""
    /// Client events (by name) that are also sent as webhooks, e.g. `message:read`.
    public var clientEvents: Set<String> = []
    /// Events per request.
    public var batchSize = 0
    /// How long an event may wait for its batch to fill.
    public var flushMs: Int64 = 0
    /// Events waiting (per URL) before new ones are dropped.
    public var queueSize = 0
    /// Bytes of events waiting (per URL, as their JSON) before new ones are dropped.
    public var queueBytes = 0
    /// Attempts per batch (0: retry without end).
    public var maxAttempts = 0
    /// First and largest retry backoff (before jitter).
    public var minBackoffMs: Int64 = 250
    public var maxBackoffMs: Int64 = 0
    /// One request's time limit.
    public var timeoutMs: Int64 = 0

    public init() {}

    public var isEnabled: Bool { !urls.isEmpty }

    var queueOptions: WebhookQueue<WebhookEvent>.Options {
        .init(batchSize: batchSize, flushMs: flushMs, capacity: queueSize, capacityBytes: queueBytes,
              retry: WebhookRetryPolicy(baseMs: minBackoffMs, maxMs: maxBackoffMs, maxAttempts: maxAttempts))
    }

    /// Problems with the settings (empty when valid), for `ConfigurationLoader`.
    public func problems() -> [String] {
        var out: [String] = []
        for url in urls {
            let lower = url.lowercased()
            let rest: Substring?
            if lower.hasPrefix("http://") { rest = lower.dropFirst(7) } else if lower.hasPrefix("https://") { rest = lower.dropFirst(8) } else { rest = nil }
            if let rest {
                if rest.isEmpty || rest.hasPrefix("/") { out.append("webhook-url: no host in \(url)") }
            } else {
                out.append("webhook-url: must be an http:// or https:// URL, got \(url)")
            }
        }
        if !urls.isEmpty, secret.isEmpty { out.append("webhook-secret: required when webhook-url is set") }
        if !secret.isEmpty, secret.utf8.count < 32 { out.append("webhook-secret: must be at least 32 characters (got \(secret.utf8.count))") }
        for name in clientEvents where !EventName.isValid(name) { out.append("webhook-events: \(name) is not an event name (entity:action)") }
        if !clientEvents.isEmpty, urls.isEmpty { out.append("webhook-events: needs webhook-url") }
        if maxBackoffMs < minBackoffMs { out.append("webhook-max-backoff-ms: at least the first backoff (\(minBackoffMs) ms)") }
        return out
    }
}
