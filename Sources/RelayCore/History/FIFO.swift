/// A first-in, first-out list: an array read from a moving head, compacted when half of it is
/// consumed, so `popFirst` is amortised O(1).
///
/// Written here rather than taken from swift-collections' `Deque` because RelayCore has no
/// dependencies: the fuzz targets compile it alone with `swiftc` (scripts/fuzz.sh).
struct FIFO<Element> {
    private var storage: [Element] = []
    private var head = 0

    init() {}

    init(_ elements: some Sequence<Element>) {
        storage = Array(elements)
    }

    var count: Int { storage.count - head }
    var isEmpty: Bool { head == storage.count }
    var first: Element? { head < storage.count ? storage[head] : nil }
    var last: Element? { head < storage.count ? storage[storage.count - 1] : nil }

    /// The `i`th element from the front (0-based); `i` must be in `0..<count`.
    subscript(i: Int) -> Element {
        get { storage[head + i] }
        set { storage[head + i] = newValue }
    }

    mutating func append(_ element: Element) {
        storage.append(element)
    }

    mutating func popFirst() -> Element? {
        guard head < storage.count else { return nil }
        let element = storage[head]
        head += 1
        if head >= 64 && head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return element
    }

    mutating func removeAll(where shouldRemove: (Element) -> Bool) {
        storage.removeFirst(head)
        head = 0
        storage.removeAll(where: shouldRemove)
    }

    /// The elements, oldest first.
    var elements: ArraySlice<Element> { storage[head...] }
}

extension FIFO: Sendable where Element: Sendable {}
extension FIFO: Equatable where Element: Equatable {
    static func == (a: FIFO, b: FIFO) -> Bool { a.elements == b.elements }
}
