import Histogram

/// What a storm looks like from the clients (`chat --backoff socketio`, the server restarted or
/// killed under them): how many sockets the server dropped, how long each took to be back (drop →
/// CONNECT answered), and every try on the way (start → answered or failed). Loop-confined,
/// merged at the end, like `ChatStats`.
final class StormStats {
    var dropped = 0
    var back = 0
    var backWithin10s = 0
    var attempts = 0
    /// Tries that took longer than 5 s to be answered or to fail.
    var attemptsOver5s = 0
    var attemptFailures: [String: Int] = [:]
    var backTime = Histogram<UInt64>(highestTrackableValue: 600_000_000)  // µs, drop → back
    var attemptTime = Histogram<UInt64>(highestTrackableValue: 600_000_000)  // µs, one try
    /// Monotonic ns of the first drop and of the last socket back (0: none).
    var firstDrop: UInt64 = 0
    var lastBack: UInt64 = 0

    init() {
        backTime.autoResize = true
        attemptTime.autoResize = true
    }

    func dropped(at now: UInt64) {
        dropped += 1
        if firstDrop == 0 || now < firstDrop { firstDrop = now }
    }

    func back(droppedAt: UInt64, now: UInt64) {
        back += 1
        let micros = (now &- droppedAt) / 1000
        if micros <= 10_000_000 { backWithin10s += 1 }
        backTime.record(micros)
        lastBack = max(lastBack, now)
    }

    func attempt(startedAt: UInt64, now: UInt64, failure: String?) {
        attempts += 1
        let micros = (now &- startedAt) / 1000
        if micros > 5_000_000 { attemptsOver5s += 1 }
        attemptTime.record(micros)
        if let failure { attemptFailures[failure, default: 0] += 1 }
    }

    func merge(_ o: StormStats) {
        dropped += o.dropped
        back += o.back
        backWithin10s += o.backWithin10s
        attempts += o.attempts
        attemptsOver5s += o.attemptsOver5s
        for (k, v) in o.attemptFailures { attemptFailures[k, default: 0] += v }
        backTime.add(o.backTime)
        attemptTime.add(o.attemptTime)
        if o.firstDrop != 0, firstDrop == 0 || o.firstDrop < firstDrop { firstDrop = o.firstDrop }
        lastBack = max(lastBack, o.lastBack)
    }

    func report(into report: inout Report) {
        guard dropped > 0 else { return }
        report.add("storm_dropped", dropped)
        report.add("storm_back", back)
        report.add("storm_not_back", dropped - back)
        report.add("storm_back_within_10s", backWithin10s)
        report.addLatency("storm_back", backTime)
        report.add("storm_back_max_ms", Double(backTime.max) / 1000, "ms")
        if lastBack > firstDrop, firstDrop > 0 { report.add("storm_first_drop_to_last_back_s", Double(lastBack - firstDrop) / 1e9, "s") }
        report.add("storm_attempts", attempts)
        report.add("storm_attempts_over_5s", attemptsOver5s)
        report.addLatency("storm_attempt", attemptTime)
        report.add("storm_attempt_max_ms", Double(attemptTime.max) / 1000, "ms")
        for (k, v) in attemptFailures.sorted(by: { $0.key < $1.key }) { report.add("storm_attempt_failure[\(k)]", v) }
    }
}
