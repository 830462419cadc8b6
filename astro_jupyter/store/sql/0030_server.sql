-- Server extension: per-user bookmarklet tokens (only a SHA-256 of each token is kept)
-- and the intake queue the bookmarklet feeds (an identifier waiting for download + parse).
CREATE TABLE IF NOT EXISTS bookmarklet_tokens (
    owner TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    last_used_at TEXT
);

CREATE TABLE IF NOT EXISTS bookmarklet_intake (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    owner TEXT NOT NULL DEFAULT '',
    identifier TEXT NOT NULL,
    kind TEXT NOT NULL,
    page_url TEXT NOT NULL DEFAULT '',
    page_title TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'processing', 'done', 'error')),
    paper_id TEXT,
    error TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX IF NOT EXISTS bookmarklet_intake_status ON bookmarklet_intake (status, id);
