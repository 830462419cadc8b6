-- Sessions, messages, runs, the events of each run, the audit log; FTS5 kept in sync by triggers.
CREATE TABLE IF NOT EXISTS agent_sessions (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL DEFAULT '',
    summary TEXT NOT NULL DEFAULT '',
    owner TEXT NOT NULL DEFAULT '',
    model TEXT NOT NULL DEFAULT '',
    coordinator INTEGER NOT NULL DEFAULT 0,
    source TEXT NOT NULL DEFAULT '',
    metadata TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX IF NOT EXISTS agent_sessions_owner ON agent_sessions (owner, updated_at);

CREATE TABLE IF NOT EXISTS agent_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES agent_sessions (id) ON DELETE CASCADE,
    run_id TEXT NOT NULL DEFAULT '',
    role TEXT NOT NULL,
    content TEXT NOT NULL DEFAULT '',
    tool_calls TEXT,
    tool_call_id TEXT,
    name TEXT,
    metadata TEXT NOT NULL DEFAULT '{}',
    compacted INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX IF NOT EXISTS agent_messages_session ON agent_messages (session_id, id);

CREATE VIRTUAL TABLE IF NOT EXISTS agent_sessions_fts USING fts5 (
    title, summary, content='agent_sessions', tokenize='porter unicode61'
);
CREATE VIRTUAL TABLE IF NOT EXISTS agent_messages_fts USING fts5 (
    content, content='agent_messages', content_rowid='id', tokenize='porter unicode61'
);

CREATE TRIGGER IF NOT EXISTS agent_sessions_ai AFTER INSERT ON agent_sessions BEGIN
    INSERT INTO agent_sessions_fts (rowid, title, summary) VALUES (new.rowid, new.title, new.summary);
END;
CREATE TRIGGER IF NOT EXISTS agent_sessions_ad AFTER DELETE ON agent_sessions BEGIN
    INSERT INTO agent_sessions_fts (agent_sessions_fts, rowid, title, summary) VALUES ('delete', old.rowid, old.title, old.summary);
END;
CREATE TRIGGER IF NOT EXISTS agent_sessions_au AFTER UPDATE OF title, summary ON agent_sessions BEGIN
    INSERT INTO agent_sessions_fts (agent_sessions_fts, rowid, title, summary) VALUES ('delete', old.rowid, old.title, old.summary);
    INSERT INTO agent_sessions_fts (rowid, title, summary) VALUES (new.rowid, new.title, new.summary);
END;

CREATE TRIGGER IF NOT EXISTS agent_messages_ai AFTER INSERT ON agent_messages BEGIN
    INSERT INTO agent_messages_fts (rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER IF NOT EXISTS agent_messages_ad AFTER DELETE ON agent_messages BEGIN
    INSERT INTO agent_messages_fts (agent_messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER IF NOT EXISTS agent_messages_au AFTER UPDATE OF content ON agent_messages BEGIN
    INSERT INTO agent_messages_fts (agent_messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO agent_messages_fts (rowid, content) VALUES (new.id, new.content);
END;

CREATE TABLE IF NOT EXISTS agent_runs (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES agent_sessions (id) ON DELETE CASCADE,
    owner TEXT NOT NULL DEFAULT '',
    prompt TEXT NOT NULL DEFAULT '',
    model TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'running',
    started_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    finished_at TEXT
);
CREATE INDEX IF NOT EXISTS agent_runs_session ON agent_runs (session_id, started_at);

CREATE TABLE IF NOT EXISTS agent_events (
    run_id TEXT NOT NULL REFERENCES agent_runs (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS agent_audit_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL DEFAULT '',
    run_id TEXT NOT NULL DEFAULT '',
    event TEXT NOT NULL,
    tool_name TEXT,
    tool_call_id TEXT,
    arguments TEXT,
    is_error INTEGER,
    duration_ms INTEGER,
    detail TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX IF NOT EXISTS agent_audit_log_session ON agent_audit_log (session_id, id);
