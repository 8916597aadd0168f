import Foundation
import RelayCore
import RelayRedis
import RelayTestSupport
import XCTest

@testable import RelayCluster
@testable import RelayServer
import RelayBackends

/// Redis Cluster safety (#31): every EVAL the relay sends declares all the keys it touches,
/// and they share one hash slot; no script builds a key name; a script that publishes does so
/// on a channel in its keys' slot. Checked on the commands each call site sends (their
/// builders), for ordinary names and for names that play with braces.
final class RedisClusterSlotTests: XCTestCase {
    /// Rooms, users and node ids, including ones whose braces move or empty a hash tag.
    /// The last five are one `Character` with the tag's brace in Swift but separate bytes to Redis:
    /// `}` then a combining mark, a leading combining mark, a trailing U+0600 (prepended
    /// concatenation mark).
    let names = [
        "conversation:1", "bob", "node-a", "a{b}c", "}x", "{}", "x}", "{", "é ü", "room:{tag}",
        "}\u{301}conversation:relay", "}\u{301}bob", "\u{301}conversation:relay", "conversation:relay\u{600}", "bob\u{600}",
    ]

    /// The declared keys of an EVAL (`EVAL script numkeys key… arg…`).
    func keys(of command: [String], file: StaticString = #filePath, line: UInt = #line) -> [String] {
        XCTAssertEqual(command.first, "EVAL", file: file, line: line)
        guard command.count >= 3, let n = Int(command[2]), command.count >= 3 + n else {
            XCTFail("malformed EVAL: \(command.prefix(3))", file: file, line: line)
            return []
        }
        return Array(command[3..<(3 + n)])
    }

    /// The slot all `keys` share (fails when they do not).
    @discardableResult
    func oneSlot(_ keys: [String], _ what: String, file: StaticString = #filePath, line: UInt = #line) -> Int? {
        XCTAssertFalse(keys.isEmpty, "\(what): an EVAL without keys", file: file, line: line)
        let slots = Set(keys.map { RedisHashSlot.slot(of: $0) })
        XCTAssertEqual(slots.count, 1, "\(what): keys in several slots: \(keys)", file: file, line: line)
        return slots.first
    }

    func testPresenceStepsEachTouchOneSlot() {
        for room in names {
            for user in names {
                let c = ClusterPresenceStore.commands(node: "node-a", room: room, user: user, devices: 2)
                oneSlot(keys(of: c.script), "updatePresence \(room) \(user)")
                XCTAssertEqual(RedisHashSlot.slot(of: keys(of: c.script)[0]), RedisHashSlot.slot(of: ClusterKeys.roomChannel(room)), "the room's keys are in its channel's slot")
                XCTAssertEqual(c.nodeRooms?[1], ClusterKeys.nodeRooms("node-a"))
                XCTAssertEqual(c.userRooms[1], ClusterKeys.userRooms(user))
                XCTAssertEqual(c.userRooms[0], "HSET")
                let gone = ClusterPresenceStore.commands(node: "node-a", room: room, user: user, devices: 0)
                XCTAssertNil(gone.nodeRooms)
                XCTAssertEqual(gone.userRooms[0], "HDEL")
                XCTAssertEqual(ClusterKeys.room(ofUserRoomField: ClusterKeys.userRoomField(room: room, node: "node-a")), room)
            }
            oneSlot(keys(of: NodeSweeper.sweepRoomCommand(node: "node-b", room: room)), "sweepRoom \(room)")
        }
        oneSlot(keys(of: NodeSweeper.heartbeatCommand(node: "node-a", ttlMs: 6_000)), "heartbeat")
    }

    func testDirectoryScriptsTouchOneUsersSlot() {
        for user in names {
            for node in names {
                let update = keys(of: ClusterDirectory.updateUserCommand(node: node, user: user, devices: 1, disconnected: false))
                let drop = keys(of: ClusterDirectory.dropNodeCommand(node: node, user: user, rooms: true))
                XCTAssertEqual(oneSlot(update, "updateUser"), oneSlot(drop, "dropNode"))
                XCTAssertEqual(drop, [ClusterKeys.directory(user), ClusterKeys.userRooms(user)])
            }
        }
    }

    func testHistoryStreamsShareTheirChannelsSlot() {
        let limits = HistoryLimits.testing
        for name in names {
            for stream in [StreamKey.room(name), .user(name)] {
                for sharded in [true, false] {
                    let publish = RedisBroker.publishCommand(stream, limits: limits, sharded: sharded)
                    let slot = oneSlot(keys(of: publish), "publish \(stream)")
                    XCTAssertEqual(publish[4], RedisBroker.channel(stream), "ARGV[1] is the channel")
                    XCTAssertEqual(slot, RedisHashSlot.slot(of: RedisBroker.channel(stream)), "the stream publishes in its own slot: \(stream)")
                }
                oneSlot(keys(of: RedisBroker.readCommand(stream, after: .zero, limit: 10)), "read")
                oneSlot(keys(of: RedisBroker.headCommand(stream)), "head")
                XCTAssertEqual(RedisBroker.stream(ofChannel: RedisBroker.channel(stream)), stream, "a channel names its stream back")
            }
            XCTAssertNotEqual(RedisBroker.historyKey(.room(name)), RedisBroker.historyKey(.user(name)))
        }
        oneSlot(keys(of: RedisBroker.recordGapCommand(until: 5, ttlMs: 10)), "gap")
    }

    func testKeptSessionScriptsTouchOneKey() {
        for user in names {
            let record = KeptSession(pid: "pid-\(user)", socketSID: "sid", userID: user, rooms: [], log: RecoveryLog(), disconnectedAtMs: 1)
            let put = RedisKeptSessionStore.putCommands(record, windowMs: 1_000, maxPerUser: 4)
            XCTAssertEqual(put.record[1], RedisKeptSessionStore.key(record.pid))
            XCTAssertEqual(keys(of: put.list), [RedisKeptSessionStore.userKey(user)])
            XCTAssertEqual(keys(of: RedisKeptSessionStore.takeCommand(pid: record.pid, user: user)), [RedisKeptSessionStore.key(record.pid)])
        }
    }

    func testWebhookScriptsTouchOneKey() {
        for name in names {
            for kind in [PresenceSubject.user, .room] {
                for present in [true, false] {
                    let c = WebhookScripts.setPresentCommands(kind, name, node: "node-a", present: present)
                    XCTAssertEqual(keys(of: c.script), [WebhookScripts.memberKey(kind, name)])
                    XCTAssertEqual((c.before ?? c.after)?[1], WebhookScripts.nodeSet(kind, "node-a"))
                    XCTAssertEqual(c.before == nil, !present, "the node's set is added to before, removed from after")
                }
                XCTAssertEqual(keys(of: WebhookScripts.sweepMemberCommand(kind, name, node: "node-b")), [WebhookScripts.memberKey(kind, name)])
            }
        }
    }

    /// Every script: no key name built inside (nothing named `relay:…`), and every command it
    /// runs names a declared key first (`KEYS[i]`, or `k`: a helper's parameter, given KEYS).
    func testScriptsNameOnlyDeclaredKeys() throws {
        let scripts: [(String, String)] = [
            ("updatePresence", ClusterScripts.updatePresence), ("sweepRoom", ClusterScripts.sweepRoom), ("heartbeat", ClusterScripts.heartbeat),
            ("updateUser", DirectoryScripts.updateUser), ("dropNode", DirectoryScripts.dropNode),
            ("publish", HistoryScripts.publish), ("read", HistoryScripts.read), ("head", HistoryScripts.head), ("gap", RedisBroker.recordGapScript),
            ("list", RedisKeptSessionStore.listScript), ("take", RedisKeptSessionStore.takeScript),
            ("setPresent", WebhookScripts.setPresent), ("sweepMember", WebhookScripts.sweepMember),
        ]
        // A command, its subcommand if any (`XINFO 'STREAM'`), then its first key.
        let call = try NSRegularExpression(pattern: #"redis\.call\('([A-Z]+)'(?:,\s*'[A-Z]+')?(?:,\s*([^,)]+))?"#)
        let helper = try NSRegularExpression(pattern: #"\b(seen|settle)\(([^,)]+)"#)
        for (name, script) in scripts {
            XCTAssertFalse(script.contains("relay:"), "\(name) builds a key name")
            let range = NSRange(script.startIndex..., in: script)
            for m in call.matches(in: script, range: range) {
                guard let command = Range(m.range(at: 1), in: script).map({ String(script[$0]) }), command != "TIME" else { continue }
                let first = Range(m.range(at: 2), in: script).map { String(script[$0]) } ?? ""
                XCTAssertTrue(first.hasPrefix("KEYS[") || first == "k", "\(name): \(command) on \(first), not a declared key")
            }
            for m in helper.matches(in: script, range: range) {
                guard let argument = Range(m.range(at: 2), in: script).map({ String(script[$0]) }), argument != "k" else { continue }
                XCTAssertTrue(argument.hasPrefix("KEYS["), "\(name): a helper on \(argument)")
            }
        }
    }

    /// Each EVAL the presence, directory, history, session and webhook sources send is built by
    /// one of the builders above (a new call site there must be added to this file): the count
    /// of `["EVAL"` in those files is the builders' count. (Receipt replication, in
    /// ReceiptReplicator, is not covered here.)
    func testEveryEvalCallSiteIsChecked() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let files = [
            "Sources/RelayCluster/ClusterBus.swift", "Sources/RelayCluster/ClusterPresenceStore.swift", "Sources/RelayCluster/ClusterDirectory.swift",
            "Sources/RelayCluster/NodeSweeper.swift", "Sources/RelayCluster/ClusterScripts.swift",
            "Sources/RelayCluster/DirectoryScripts.swift", "Sources/RelayCluster/HistoryScripts.swift", "Sources/RelayCluster/RedisBroker.swift",
            "Sources/RelayCluster/RedisPresenceManager.swift", "Sources/RelayCluster/RedisKeptSessionStore.swift",
            "Sources/RelayCluster/WebhookScripts.swift", "Sources/RelayCluster/RedisWebhookPresence.swift",
        ]
        var sites: [String] = []
        for file in files {
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            for (i, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() where line.contains("[\"EVAL\"") {
                sites.append("\(file):\(i + 1)")
            }
        }
        // presence, sweepRoom, heartbeat, updateUser, dropNode, publish, read, head, gap,
        // list, take, setPresent, sweepMember.
        XCTAssertEqual(sites.count, 13, "EVAL call sites: \(sites.sorted())")
    }
}
