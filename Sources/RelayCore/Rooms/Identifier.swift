import Foundation

/// Placeholder until the core-parsers branch lands (same API).
public enum Identifier {
    public static func isNormalized(_ s: String) -> Bool {
        if s.utf8.allSatisfy({ $0 < 0x80 }) { return true }
        return s.precomposedStringWithCanonicalMapping.utf8.elementsEqual(s.utf8)
    }

    public static func isValid(_ s: String, maxBytes: Int) -> Bool {
        !s.isEmpty && s.utf8.count <= maxBytes && isNormalized(s)
    }
}
