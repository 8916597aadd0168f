import XCTest
@testable import RelayCore

final class JSONValueTests: XCTestCase {
    func testLiterals() {
        XCTAssertEqual("s" as JSONValue, .string("s"))
        XCTAssertEqual(3 as JSONValue, .int(3))
        XCTAssertEqual(2.5 as JSONValue, .double(2.5))
        XCTAssertEqual(true as JSONValue, .bool(true))
        XCTAssertEqual(nil as JSONValue, .null)
        XCTAssertEqual([1, "a"] as JSONValue, .array([.int(1), .string("a")]))
        XCTAssertEqual(["k": 1] as JSONValue, .object([("k", .int(1))]))
    }

    func testIntAndDoubleCompareNumerically() {
        XCTAssertEqual(JSONValue.int(2), .double(2.0))
        XCTAssertEqual(JSONValue.double(2.0), .int(2))
        XCTAssertNotEqual(JSONValue.int(2), .double(2.5))
        XCTAssertNotEqual(JSONValue.int(1), .bool(true))
        XCTAssertNotEqual(JSONValue.string("1"), .int(1))
        XCTAssertNotEqual(JSONValue.null, .bool(false))
    }

    func testObjectEqualityIgnoresOrderButNotContent() {
        let a: JSONValue = .object([("x", 1), ("y", 2)])
        XCTAssertEqual(a, .object([("y", 2), ("x", 1)]))
        XCTAssertNotEqual(a, .object([("x", 1), ("y", 3)]))
        XCTAssertNotEqual(a, .object([("x", 1)]))
        XCTAssertNotEqual(a, .object([("x", 1), ("z", 2)]))
        XCTAssertNotEqual(a, .array([1, 2]))
    }

    func testArrayEqualityIsOrdered() {
        XCTAssertEqual([1, 2] as JSONValue, [1, 2] as JSONValue)
        XCTAssertNotEqual([1, 2] as JSONValue, [2, 1] as JSONValue)
        XCTAssertNotEqual([1] as JSONValue, [1, 1] as JSONValue)
    }

    func testEqualityIsSymmetricWithDuplicateKeys() {
        // The parser refuses duplicate keys, but values built in code may have them: == must stay
        // symmetric for them.
        let a: JSONValue = .object([("a", 1), ("a", 1)])
        let b: JSONValue = .object([("a", 1), ("a", 2)])
        XCTAssertEqual(a == b, b == a)
        XCTAssertNotEqual(a, b)
        XCTAssertNotEqual(b, a)
        XCTAssertEqual(b, .object([("a", 1), ("a", 2)]), "reflexive")
        // Distinct keys may come in any order; a repeated key's values are compared in order.
        XCTAssertEqual(JSONValue.object([("a", 1), ("x", 0), ("a", 2)]), .object([("x", 0), ("a", 1), ("a", 2)]))
        XCTAssertNotEqual(JSONValue.object([("a", 1), ("a", 2)]), .object([("a", 2), ("a", 1)]))
        XCTAssertNotEqual(JSONValue.object([("a", 1), ("a", 1)]), .object([("a", 1), ("b", 1)]))
        XCTAssertNotEqual(JSONValue.object([("a", 1), ("b", 1)]), .object([("a", 1), ("a", 1)]))
    }

    func testEqualityAxiomsOnParsedValues() throws {
        let texts = [
            #"{"a":1,"b":2}"#, #"{"b":2,"a":1}"#, #"{"a":1,"c":1}"#,
            #"{"a":1.0,"b":2}"#, #"{"a":[1,{"c":null}]}"#, #"{"a":[1,{"c":false}]}"#, "{}", "[]", "1", "1.5", "null",
        ]
        // Objects with duplicate keys cannot come from the parser; build them directly.
        let values = try texts.map { try JSONParser.parse($0) } + [
            .object([("a", 1), ("a", 2)]), .object([("a", 2), ("a", 1)]), .object([("a", 1), ("a", 1)]),
        ]
        for x in values {
            XCTAssertEqual(x, x, "reflexive: \(x)")
            for y in values {
                XCTAssertEqual(x == y, y == x, "symmetric: \(x) vs \(y)")
            }
        }
    }

    func testSubscript() {
        let v: JSONValue = .object([("a", 1), ("b", "x"), ("a", 2)])
        XCTAssertEqual(v["a"], .int(1), "first match wins")
        XCTAssertEqual(v["b"], .string("x"))
        XCTAssertNil(v["missing"])
        XCTAssertNil(JSONValue.array([1])["a"])
        XCTAssertNil(JSONValue.string("a")["a"])
    }

    func testAccessors() {
        XCTAssertEqual(JSONValue.string("s").stringValue, "s")
        XCTAssertNil(JSONValue.int(1).stringValue)
        XCTAssertEqual(JSONValue.int(3).doubleValue, 3)
        XCTAssertEqual(JSONValue.double(3.5).doubleValue, 3.5)
        XCTAssertNil(JSONValue.string("3").doubleValue)
        XCTAssertEqual(JSONValue.bool(true).boolValue, true)
        XCTAssertNil(JSONValue.int(1).boolValue)
        XCTAssertTrue(JSONValue.object([]).isObject)
        XCTAssertFalse(JSONValue.array([]).isObject)
        XCTAssertFalse(JSONValue.null.isObject)
    }

    func testIntValue() {
        XCTAssertEqual(JSONValue.int(-7).intValue, -7)
        XCTAssertEqual(JSONValue.double(60.0).intValue, 60)
        XCTAssertEqual(JSONValue.double(-0.0).intValue, 0)
        XCTAssertNil(JSONValue.double(60.5).intValue)
        XCTAssertNil(JSONValue.double(1e16).intValue, "too large to be exact")
        XCTAssertNil(JSONValue.double(.nan).intValue)
        XCTAssertNil(JSONValue.double(.infinity).intValue)
        XCTAssertNil(JSONValue.string("1").intValue)
        XCTAssertNil(JSONValue.bool(true).intValue)
    }

    func testSettingReplacesAndAppends() {
        let v: JSONValue = .object([("from", "forged"), ("a", 1), ("ts", 0)])
        let stamped = v.setting("from", to: "alice")
        guard case .object(let pairs) = stamped else { return XCTFail("expected an object") }
        XCTAssertEqual(pairs.map(\.0), ["a", "ts", "from"])
        XCTAssertEqual(stamped["from"], .string("alice"))
        // Every duplicate of the key is removed.
        let dup: JSONValue = .object([("k", 1), ("k", 2)])
        XCTAssertEqual(JSONWriter.string(dup.setting("k", to: 3)), #"{"k":3}"#)
        // Non-objects are returned unchanged.
        XCTAssertEqual(JSONValue.array([1]).setting("k", to: 1), .array([1]))
        XCTAssertEqual(JSONValue.null.setting("k", to: 1), .null)
    }

    /// Setting several fields at once is the same as setting them one by one (what `stamp` did).
    func testSettingSeveralFieldsEqualsSettingThemInTurn() {
        let v: JSONValue = .object([("ts", 0), ("from", "forged"), ("a", 1), ("from", "again"), ("b", .array([1]))])
        let once = v.setting([("from", "alice"), ("ts", 42)])
        XCTAssertEqual(once, v.setting("from", to: "alice").setting("ts", to: 42))
        XCTAssertEqual(JSONWriter.string(once), #"{"a":1,"b":[1],"from":"alice","ts":42}"#)
        XCTAssertEqual(JSONValue.string("x").setting([("k", 1)]), .string("x"))
        XCTAssertEqual(EventValidator.stamp(v, from: "alice", ts: 42), once)
    }
}
