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
        return migrator
    }
}
