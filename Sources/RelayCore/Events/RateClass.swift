/// Per-kind rate-limit budgets (the overall per-connection budget applies on top).
public enum RateClass: String, Sendable, CaseIterable {
    case control, typing, reaction, location, receipt, custom
}
