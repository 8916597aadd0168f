import NIOConcurrencyHelpers

extension NIOLockedValueBox {
    /// `withLockedValue` for closures with a typed error (the NIO method is untyped `rethrows`).
    func withLock<T, E: Error>(_ body: (inout Value) throws(E) -> T) throws(E) -> T {
        let result: Result<T, E> = withLockedValue { value in Result { () throws(E) in try body(&value) } }
        return try result.get()
    }
}
