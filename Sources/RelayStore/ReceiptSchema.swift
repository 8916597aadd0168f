import GRDB

/// The receipts database schema, as GRDB migrations. Append new migrations; never edit old ones.
enum ReceiptSchema {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-receipts") { db in
            // AUTOINCREMENT: the id is the sync cursor, so it must never be reused, even after
            // retention deletes the newest rows.
            try db.execute(
                sql: """
                    CREATE TABLE receipt (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        room TEXT NOT NULL,
                        message_id TEXT NOT NULL,
                        author_id TEXT NOT NULL,
                        user_id TEXT NOT NULL,
                        kind TEXT NOT NULL CHECK (kind IN ('delivered', 'read')),
                        ts INTEGER NOT NULL,
                        UNIQUE (message_id, user_id, kind)
                    );
                    CREATE INDEX receipt_author_id ON receipt (author_id, id);
                    CREATE INDEX receipt_ts ON receipt (ts);
                    """)
        }
        migrator.registerMigration("v2-drop-ts-index") { db in
            // Retention walks the lowest ids instead; one index fewer to update per receipt.
            try db.execute(sql: "DROP INDEX IF EXISTS receipt_ts")
        }
        migrator.registerMigration("v3-health") { db in
            try db.execute(sql: "CREATE TABLE health (id INTEGER PRIMARY KEY CHECK (id = 1), ts INTEGER NOT NULL)")
        }
        migrator.registerMigration("v4-cluster-replication") { db in
            // Cluster mode: every node keeps a replica of every node's receipts. `gid` is the
            // cluster cursor (from the Redis stream), `origin` the node that acked a receipt
            // (NULL: this node), `replicated` whether this node's receipt reached the stream.
            try db.execute(
                sql: """
                    ALTER TABLE receipt ADD COLUMN gid INTEGER;
                    ALTER TABLE receipt ADD COLUMN origin TEXT;
                    ALTER TABLE receipt ADD COLUMN replicated INTEGER NOT NULL DEFAULT 1;
                    CREATE UNIQUE INDEX receipt_gid ON receipt (gid) WHERE gid IS NOT NULL;
                    CREATE INDEX receipt_author_gid ON receipt (author_id, gid) WHERE gid IS NOT NULL;
                    CREATE INDEX receipt_unreplicated ON receipt (id) WHERE replicated = 0;
                    CREATE TABLE cluster_state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                    """)
        }
        return migrator
    }
}
