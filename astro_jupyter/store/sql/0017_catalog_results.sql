-- Catalog query results (query_catalog, cone_search): the provenance of every TAP query, the
-- failed ones too (their service's error text, no file), and where the VOTable of a successful
-- one lies under tool-results/ (per owner, like other persisted tool outputs).
CREATE TABLE IF NOT EXISTS catalog_results (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL DEFAULT '',
    session_id TEXT,
    service TEXT NOT NULL,
    service_url TEXT NOT NULL,
    adql TEXT NOT NULL,
    maxrec INTEGER,
    mode TEXT NOT NULL CHECK (mode IN ('sync', 'async')),
    status TEXT NOT NULL CHECK (status IN ('ok', 'error')),
    row_count INTEGER,
    truncated INTEGER NOT NULL DEFAULT 0,
    error TEXT NOT NULL DEFAULT '',
    path TEXT,
    bytes INTEGER,
    duration_ms INTEGER,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX IF NOT EXISTS catalog_results_owner ON catalog_results (owner, created_at);
