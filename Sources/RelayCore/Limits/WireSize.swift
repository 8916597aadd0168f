/// What a packet costs on each transport, so that one byte limit holds for both.
public enum WireSize {
    /// Standard base64 of `count` bytes, with padding.
    public static func base64(_ count: Int) -> Int {
        let (groups, overflow) = (count / 3 + (count % 3 == 0 ? 0 : 1)).multipliedReportingOverflow(by: 4)
        return overflow ? .max : groups
    }

    /// Long-polling: the text packet, then per attachment a separator, `b` and its base64. The
    /// costliest transport: a WebSocket carries the attachments as they are.
    public static func polling(text: Int, attachments: [Int]) -> Int {
        attachments.reduce(text) { total, bytes in
            let (sum, overflow) = total.addingReportingOverflow(2 &+ base64(bytes))
            return overflow ? .max : sum
        }
    }
}
