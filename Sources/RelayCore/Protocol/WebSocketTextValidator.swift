/// Validates the UTF-8 of a client's text messages as their bytes arrive, across fragments and
/// TCP segments, so that a message whose text goes invalid is refused at the first bad byte
/// (RFC 6455 §8.1 "fail fast"; Autobahn 6.4.x), not once the whole message has been buffered.
///
/// It follows the frame boundaries of the raw byte stream (like `WebSocketFrameScanner`) and
/// unmasks only the payload bytes of uncompressed text messages; binary messages, control
/// frames and compressed messages (checked after inflating) pass unread. It never buffers.
public struct WebSocketTextValidator: Sendable {
    public enum Verdict: Equatable, Sendable {
        case ok
        /// A text message is not valid UTF-8 (a bad byte, or a message ending mid-character).
        case invalidUTF8
    }

    private var header = WebSocketHeaderBytes()
    private var remaining: UInt64 = 0
    private var mask: (UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0)
    private var maskIndex: UInt8 = 0
    /// The frame being read carries text to validate.
    private var validating = false
    /// The frame being read is the message's last (FIN on a data frame).
    private var finalFrame = false
    /// The message in progress is uncompressed text.
    private var textMessage = false
    private var utf8 = UTF8Decoder()

    public init() {}

    /// Feeds the next bytes of the stream.
    public mutating func scan(_ bytes: UnsafeRawBufferPointer) -> Verdict {
        var index = 0
        let count = bytes.count
        while index < count {
            if remaining > 0 {
                let available = count - index
                // `take` ≤ available, an Int.
                let take = Int(min(remaining, UInt64(available)))
                if validating {
                    for offset in 0..<take {
                        let byte = bytes[index + offset] ^ maskByte()
                        guard utf8.feed(byte) else { return .invalidUTF8 }
                    }
                }
                index += take
                remaining -= UInt64(take)
                if remaining == 0, let verdict = frameEnded(), verdict != .ok { return verdict }
                continue
            }
            let complete = header.append(bytes[index])
            index += 1
            guard complete else { continue }
            startFrame()
            if remaining == 0, let verdict = frameEnded(), verdict != .ok { return verdict }
        }
        return .ok
    }

    private mutating func maskByte() -> UInt8 {
        defer { maskIndex = (maskIndex + 1) & 3 }
        switch maskIndex {
        case 0: return mask.0
        case 1: return mask.1
        case 2: return mask.2
        default: return mask.3
        }
    }

    private mutating func startFrame() {
        let first = header.first
        let opcode = header.opcode
        let fin = first & 0x80 != 0
        let compressed = first & 0x40 != 0
        remaining = header.payloadLength
        // Unmasked: all zero (the frame reader refuses such a frame anyway).
        mask = header.maskKey
        maskIndex = 0
        header.reset()
        switch opcode {
        case 0x1:
            textMessage = !compressed
            utf8 = UTF8Decoder()
        case 0x2:
            textMessage = false
        case 0x0:
            break  // a continuation: the message's own kind
        default:
            // A control frame (between fragments too): not part of any message.
            validating = false
            finalFrame = false
            return
        }
        validating = textMessage
        finalFrame = fin
    }

    /// The current frame's payload is complete.
    private mutating func frameEnded() -> Verdict? {
        guard finalFrame else { return nil }
        finalFrame = false
        defer {
            textMessage = false
            validating = false
        }
        return validating && !utf8.isComplete ? .invalidUTF8 : .ok
    }
}

/// UTF-8 validation one byte at a time (RFC 3629): no overlong forms, no surrogates, nothing
/// above U+10FFFF.
struct UTF8Decoder: Sendable {
    /// Continuation bytes still expected for the current character.
    private var needed: UInt8 = 0
    /// Bounds of the next continuation byte (narrower right after some lead bytes).
    private var lower: UInt8 = 0x80
    private var upper: UInt8 = 0xBF

    var isComplete: Bool { needed == 0 }

    /// `false` at the first byte that cannot be part of valid UTF-8.
    mutating func feed(_ byte: UInt8) -> Bool {
        if needed == 0 {
            switch byte {
            case 0x00...0x7F: return true
            case 0xC2...0xDF: needed = 1
            case 0xE0: needed = 2; lower = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: needed = 2
            case 0xED: needed = 2; upper = 0x9F
            case 0xF0: needed = 3; lower = 0x90
            case 0xF1...0xF3: needed = 3
            case 0xF4: needed = 3; upper = 0x8F
            default: return false
            }
            return true
        }
        guard byte >= lower, byte <= upper else { return false }
        lower = 0x80
        upper = 0xBF
        needed -= 1
        return true
    }
}
