import RelayCore

/// What a long-polling session's endpoint asked its session to tell it. Empty for the sessions
/// of WebSockets (most of them): one `nil` reference instead of two empty closures each.
struct PollingHooks {
    private final class Box {
        var onEnd: (() -> Void)?
        var onLimits: ((LimitsInForce) -> Void)?
    }

    private var box: Box?

    var onEnd: (() -> Void)? {
        get { box?.onEnd }
        set { change { $0.onEnd = newValue } }
    }
    var onLimits: ((LimitsInForce) -> Void)? {
        get { box?.onLimits }
        set { change { $0.onLimits = newValue } }
    }

    /// Made at the first hook set, dropped once none is left.
    private mutating func change(_ body: (Box) -> Void) {
        let box = self.box ?? Box()
        body(box)
        self.box = box.onEnd == nil && box.onLimits == nil ? nil : box
    }
}
