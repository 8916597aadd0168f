/// What `HTTPHandler` does with a request's body.
enum BodyPolicy {
    /// Keep up to `limit` bytes (413 past it); `release` is called once the request is done.
    case read(limit: Int, release: (@Sendable () -> Void)?)
    /// Read and drop it: the route takes no body, or the caller may not send one. The request
    /// is answered as if its body were empty, and the connection is not kept.
    case discard
    /// Answer this before reading the body, and close.
    case refuse(HTTPResponse)
}
